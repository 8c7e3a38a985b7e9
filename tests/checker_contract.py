"""The behaviour every chapter's exercise checkers must have, as reusable tests.

A test module lists, for its chapter, a correct answer per exercise and one or more wrong ones,
then binds the returned functions to module-level names so pytest collects them::

    (test_every_exercise_is_covered, test_correct_passes, test_wrong_fails_with_hint,
     test_stub_is_not_attempted) = checker_contract("parity", CORRECT, WRONG)
"""

from __future__ import annotations

import pytest

from homework.checks import check, registered


def stub(*args):
    """What a student notebook holds before the exercise is done."""
    raise NotImplementedError("exercise")


def checker_contract(chapter: str, correct: dict, wrong: dict):
    """Tests: every registered exercise of ``chapter`` has a correct answer here; it passes;
    each wrong answer (a function or a list of them) fails with a hint; the stub is
    "not attempted"."""
    wrong_cases = [(e, i) for e in sorted(wrong)
                   for i in range(len(wrong[e]) if isinstance(wrong[e], list) else 1)]

    def test_every_exercise_is_covered():
        ids = [e for e in registered() if e.startswith(chapter + "/")]
        assert sorted(ids) == sorted(correct)

    @pytest.mark.parametrize("exercise", sorted(correct))
    def test_correct_passes(exercise):
        assert check(exercise, correct[exercise], quiet=True).status == "passes"

    @pytest.mark.filterwarnings("ignore::RuntimeWarning")
    @pytest.mark.parametrize("exercise,index", wrong_cases)
    def test_wrong_fails_with_hint(exercise, index):
        answer = wrong[exercise][index] if isinstance(wrong[exercise], list) else wrong[exercise]
        result = check(exercise, answer, quiet=True)
        assert result.status == "fails" and result.message

    @pytest.mark.parametrize("exercise", sorted(correct))
    def test_stub_is_not_attempted(exercise):
        assert check(exercise, stub, quiet=True).status == "not attempted"

    return (test_every_exercise_is_covered, test_correct_passes, test_wrong_fails_with_hint,
            test_stub_is_not_attempted)
