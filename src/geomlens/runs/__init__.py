"""Run folders: their files (manifest, metrics, statistics, windows), the claim on a
folder and its lock, reuse and resume of finished work (``runfolder``, ``stored``,
``lifecycle``)."""
