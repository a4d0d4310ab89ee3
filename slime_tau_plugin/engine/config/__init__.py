"""``TauConfig`` (``tau_config``): every knob, each key declared once (``keys``) through one declaration helper
(``fields``). A trainer's own arguments are read in its adapter (slime's: ``adapters/slime/args.py``).

May import: ``envs`` (the benchmark table), ``episode`` (limits), ``net`` (replica URLs, the user's token budget),
``review`` (the review's check and tag names), ``errors``, ``choices``.
"""
