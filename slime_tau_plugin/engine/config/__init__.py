"""``TauConfig`` (``tau_config``): every knob, each key declared once (``keys``) through one declaration helper
(``fields``); slime's ``args`` read by ``slime_args``.

May import: ``envs`` (the benchmark table), ``episode`` (limits), ``net`` (replica URLs, the user's token budget),
``errors``, ``choices``.
"""
