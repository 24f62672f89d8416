"""The run every capturing command shares, below the commands: one ``RunRequest`` in, one
finished run folder out (``pipeline.run.run``).

load the model and the windows -> capture (streaming, resumable) -> the request's
``Analysis`` -> the request's judge (the papers' claims) -> the run folder completed. The
commands only turn their options into a request; the analysis steps live in their folders
(``analyses/<name>/step.py``), and the pipeline names none of them.
"""
