"""The ``slime-tau`` CLI: playing a rollout's batch and what guards it: the runner (``play_sample`` per episode, the
summary), the batch into its run folder, progress and signals, the checks before and during a run (endpoints, the
served model, the context length, the tool-call parser, the task selection), prepare's pass-rate filter and verify's
driver.
"""
