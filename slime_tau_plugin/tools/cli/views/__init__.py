"""The ``slime-tau`` CLI: what ``show`` and the summary print from run files: the HTML page, the dump summary, two
runs compared, the review's marks.
"""
