"""The customer's review: is the simulated user the reason an episode passed or failed (issue 33)?

τ²'s authors found user-simulator errors decide up to 30% of failed retail trajectories. In GRPO an episode the
customer hindered pushes a good policy down, and one it helped rewards nothing, so each finished episode's customer
messages are reviewed and a critical error takes the episode out of training (``user_error``), like a failure.

This sub-package holds the review's values and pure checks, low enough that the episode's result, the config and
the users can name them:

- ``verdict.py``: τ²'s tags and severities, a finding, the verdict (``metadata["tau_review"]``).
- ``facts.py``: the fact-like spans a customer states, found by their make-up (numbers, emails, codes, names, τ's
  database value words in ``tau_values.txt``).
- ``grounding.py``: whether the customer could know a span (normal forms: digits, values, dates, words).
- ``speech_acts.py``: the agent's speech acts (offer, report, verify, greet) in a customer message, read off
  sentence features; ``speech_words.py``: the words those features weigh.
- ``checks.py``: the deterministic checks and how a finding gets its severity.
- ``stops.py``: the premature stop (a customer that ends before the required write while the agent waits on it).
- ``names.py``: a comma list of checks or tags, checked.
- ``metrics.py``: per-step counts by tag, severity, check and task.

What runs the review lives with its kind: ``config/review_settings.py`` (the ``tau_review_*`` keys as one value),
``users/review_judge.py`` (τ²'s reviewer rubric through the judge endpoint, for a share of episodes) and
``loop/review.py`` (the loop's one call at an episode's end, and what a verdict does to the result).

May import: ``errors`` only (no trainer, no network, no τ).
"""
