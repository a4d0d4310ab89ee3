"""slime's seams: ``generate`` (one ``Sample``), the rollout/eval log functions, the group filter, advantages and
the all-samples hook. slime itself is imported only inside functions that run in slime's process."""
