"""pytest plugin: nbval judges a chapter by the rules of the book build (issue 17).

``make test`` runs every chapter through nbval; ``make book`` executes the same chapters with
myst-nb/nbclient. Left alone the two disagree:

* **Failure rule.** nbclient fails a cell when its ``execute_reply`` has ``status: error``
  (unless the cell is tagged ``raises-exception``). nbval 0.11 looks only at ``error``
  messages on the iopub channel and discards the reply, so an error that IPython reports
  without an ``error`` message (an unknown line magic: a ``UsageError`` printed on stderr)
  passes nbval and fails the build. nbval also honours ``# NBVAL_RAISES_EXCEPTION`` comments,
  which the build ignores. This plugin keeps each cell's reply and fails the cell when its
  status is ``error`` and the cell is not tagged ``raises-exception``.
* **Cells.** The build skips cells tagged ``skip-execution`` and executes everything else;
  nbval skips ``nbval-skip`` cells and executes ``skip-execution`` ones. Here a
  ``skip-execution`` cell is skipped and an ``nbval-skip`` cell fails (the build runs it).
* **Kernel.** The build starts the kernel named by the notebook's ``kernelspec``; nbval
  (``--nbval-current-env``) ignores it and runs the current environment. A chapter whose
  kernelspec is not ``python3`` (the current environment's kernel) fails here as in the build.

Loaded by ``scripts/run_tests.py`` with ``-p nbval_build_rules``.
"""

from __future__ import annotations

import pytest

KERNEL = "python3"  # the kernel the build runs: the current environment's ipykernel
ALLOW_ERROR_TAG = "raises-exception"  # nbclient's tag for a cell allowed to fail
SKIP_TAG = "skip-execution"  # myst-nb's tag for a cell the build does not execute


def _keep_replies():
    """Make nbval's kernel remember the execute_reply of each cell it ran."""
    from nbval.kernel import RunningKernel

    if getattr(RunningKernel, "_build_rules", False):
        return
    original = RunningKernel.get_message

    def get_message(self, stream, timeout=None):
        msg = original(self, stream, timeout=timeout)
        if stream == "shell" and msg.get("msg_type") == "execute_reply":
            self.last_reply = msg
        return msg

    RunningKernel.get_message = get_message
    RunningKernel._build_rules = True


def pytest_configure(config):
    _keep_replies()


def _is_nbval_cell(item) -> bool:
    return type(item).__name__ == "IPyNbCell" and hasattr(item, "cell")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if not _is_nbval_cell(item):
        return
    nb = getattr(item.parent, "nb", None)
    kernel = ((nb or {}).get("metadata", {}).get("kernelspec") or {}).get("name")
    if kernel != KERNEL:
        pytest.fail(f"{item.parent.path.name}: the kernelspec names kernel {kernel!r}; the book "
                    f"build would start that kernel, the tests run {KERNEL!r}. Set the chapter's "
                    f"kernelspec name to {KERNEL!r}.", pytrace=False)
    tags = set(item.cell.get("metadata", {}).get("tags", []))
    if SKIP_TAG in tags:
        pytest.skip(f"tagged {SKIP_TAG}: the book build does not execute this cell")
    if item.options.get("skip"):
        pytest.fail("nbval-skip: the book build executes this cell, so the tests must too "
                    f"(tag it {SKIP_TAG} to skip it in both)", pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    if not _is_nbval_cell(item):
        yield
        return
    kernel = item.parent.kernel
    kernel.last_reply = None
    outcome = yield
    if outcome.excinfo is not None:
        return
    reply = (kernel.last_reply or {}).get("content", {})
    tags = set(item.cell.get("metadata", {}).get("tags", []))
    if reply.get("status") == "error" and ALLOW_ERROR_TAG not in tags:
        outcome.force_exception(pytest.fail.Exception(
            f"cell {item.cell_num}: the kernel replied status 'error' "
            f"({reply.get('ename')}: {reply.get('evalue')}) without an error message on iopub; "
            f"the book build fails on this cell.\n--- cell source ---\n{item.cell.source}",
            pytrace=False))
