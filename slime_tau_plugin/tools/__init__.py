"""Tools around the plugin: the ``slime-tau`` CLI, the built-in servers, the soak driver, the tiny model and fault
injection. They import the engine and the adapters; nothing in the engine or an adapter imports them."""
