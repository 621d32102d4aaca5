"""Functions and methods whose result a step loop of another module moves to the GPU.

    # diffusion.py                                  # train.py (`diffusion = Diffusion(...)`)
    def sample_timesteps(self, n):                  for images, _ in loader:
        return torch.randint(1, self.steps, (n,))       t = diffusion.sample_timesteps(n).to(device)

The factory's module sees no caller that moves what it returns (`later_moves._calls_of` follows this module's
own calls); the project index does: a call of the function, or of the method on an instance of its class (as the
summary resolves the receiver), in a training step loop of another module, not under a `step % N` guard, whose
result that loop moves to the GPU, unguarded. `later_moves.moved_later` then reports the factory at its own line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpulint.analysis.summary import MODULE_BODY

if TYPE_CHECKING:
    from gpulint.analysis.project import ProjectIndex, ModuleRecord


def moved_returns(index: ProjectIndex, record: ModuleRecord) -> dict[str, str]:
    """The functions and methods of `record` (`make_noise`, `Diffusion.sample_timesteps`) whose result a step
    loop of another module moves to the GPU -> where (`train.py:77`)."""
    found: dict[str, str] = {}
    for key in record.summary.functions:
        if key == MODULE_BODY:
            continue
        for caller, caller_key, position in index.callers(record, key):
            f = caller.summary.functions[caller_key]
            call = f.calls[position]
            if caller is record or call[5] or not index.in_step_loop(caller, f, call[4]):
                continue  # (this module's own callers are in sight of `later_moves`)
            moves = [e for e in f.effects.get(f"c:{position}", ()) if e[0] == "move" and not e[4]]
            move = next((e for e in moves if index.in_step_loop(caller, f, e[3])), None)
            if move is not None:
                found[key] = f"{caller.shown}:{move[1]}"
                break
    return found
