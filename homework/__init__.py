"""Instructors' homework tools: not part of ``lib`` and not installed with it.

* :mod:`homework.checks`: the checkers of the coding exercises (references, hints).
* :mod:`homework.edition`: reads the exercises of a chapter (the course's exercise convention).
* :mod:`homework.otter`: otter-grader master notebooks, ``otter assign`` and grading.
* :mod:`homework.hidden`, :mod:`homework.judge`: what the hidden tests run (the student's side,
  in the kernel, and the judge, a fresh process outside it that runs the checker).
* :mod:`homework.grade`: ``make grade`` (limits, static scan, CSV, feedback).

Students install ``lib`` only; this folder stays with the instructors (the autograder zip
built by ``make assign`` carries what the hidden tests need).
"""
