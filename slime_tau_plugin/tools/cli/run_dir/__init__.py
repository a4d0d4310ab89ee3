"""The ``slime-tau`` CLI: a run folder's files: where a rollout writes (``run_output``), what ``summary.json``
records (``run_record``), reading a run back (``run_files``, ``run_state``) and slime's rollout dumps
(``rollout_dump``).
"""
