"""The sections of report.html, in page order.

Each analysis declares its section (readings, tables, figures and their captions) in its
own module under ``report/sections/``; adding an analysis to the page is one line here.
"""

from __future__ import annotations

from geomlens.report.section import Section
from geomlens.report.sections import attention, concepts, decomposition, overview, sphere, walk

REGISTRY: tuple[Section, ...] = (
    overview.SUMMARY,
    overview.CLAIMS,
    decomposition.SECTION,
    attention.SECTION,
    sphere.SECTION,
    walk.SECTION,
    concepts.SECTION,
    overview.RUN,
)
