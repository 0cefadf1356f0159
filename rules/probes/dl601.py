"""The probe of DL601 (a training loop that never zeroes gradients).

The `.grad` of the parameters the finding's `step()` updates, read at each
of its steps and around every backward in between: the hazard is a gradient
the first step applied that is still there, never cleared, when the second
step applies it again with the next batch's gradient added.
"""

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from detachlint.verify.runtime.standins import Enough, Inconclusive
from detachlint.verify.runtime.observe import calling_line, notes, statement_lines, tapping_backward
from detachlint.verify.runtime.user_code import find_working


def _gradients(optimizer):
    """The optimizer's parameters and a copy of each one's `.grad` (None when unset)."""
    params = [p for group in optimizer.param_groups for p in group["params"] if isinstance(p, torch.Tensor)]
    return [(p, None if p.grad is None else p.grad.detach().clone()) for p in params]


def _held(state):
    """Which parameters hold a non-zero gradient in a `_gradients` copy."""
    return [grad is not None and bool(grad.ne(0).any()) for _, grad in state]


def _norm(grads):
    grads = [g.float() for g in grads if g is not None]
    return float(torch.sqrt(sum((g * g).sum() for g in grads))) if grads else 0.0


def probe(spec, budget):
    """Two steps of the finding's `step()`, watched: confirmed when the
    gradient the first step applied is still there, never cleared, when the
    second step applies it with the next backward's added."""
    first, last = statement_lines(spec)
    events = []  # ("step", optimizer, state) / ("backward", line, "before"|"after", {id: state})
    stepped = {}

    def on_step(optimizer, args, kwargs):
        line = calling_line(spec)
        if line is None or not first <= line <= last:
            return
        stepped.setdefault(id(optimizer), optimizer)
        events.append(("step", optimizer, _gradients(optimizer)))
        if sum(1 for e in events if e[0] == "step" and e[1] is optimizer) >= 2:
            raise Enough()  # two steps are all the probe needs

    def tap(when):
        def record(line, *error):
            if stepped:
                events.append(("backward", line, when, {key: _gradients(o) for key, o in stepped.items()}))

        return record

    def reset(statement):
        # A new attempt: what an earlier one saw does not count.
        events.clear()
        stepped.clear()
        return []

    handle = register_optimizer_step_pre_hook(on_step)
    try:
        with tapping_backward(spec, before=tap("before"), after=tap("after")):
            run = find_working(spec, after=reset, need_finish=True, budget=budget)
    finally:
        handle.remove()
    suffix = notes(run)
    steps = [e for e in events if e[0] == "step"]
    if not steps:
        raise Inconclusive("the step on this line never reached an optimizer with synthesized inputs" + suffix)
    optimizer = steps[0][1]
    step_text = spec.get("hints", {}).get("call") or "step()"
    mine = [i for i, e in enumerate(events) if e[0] == "step" and e[1] is optimizer]
    if len(mine) < 2:
        where = spec["message"].split("every `backward()` ", 1)[-1].split(" adds to", 1)[0].rstrip(",")
        because = (
            f": `{step_text}` runs once per call, and the loop that calls it is not part of the reproduction"
            if where.startswith("of `") else ""
        )
        raise Inconclusive(f"`{step_text}` ran once with synthesized inputs{because}; the sum shows from the second step" + suffix)
    one, two = mine[0], mine[1]
    applied = events[one][2]
    carried = _held(applied)
    if not any(carried):
        raise Inconclusive(f"the first `{step_text}` applied no gradient (every .grad None or zero)" + suffix)
    # The states of the stepped parameters between the two steps, in order, and where each was read.
    between = [e for e in events[one + 1 : two] if e[0] == "backward"]
    states = [e[3][id(optimizer)] for e in between] + [events[two][2]]
    places = [f"{e[2]} the backward on line {e[1]}" for e in between] + ["at the second step"]
    total = sum(carried)
    count = f"{total} parameter{'s' if total != 1 else ''}"
    if not between:
        raise Inconclusive(f"no backward ran between the first two runs of `{step_text}` with synthesized inputs" + suffix)
    kept, cleared = list(carried), None
    for state, place in zip(states, places):
        kept = [k and h for k, h in zip(kept, _held(state))]
        if not any(kept):
            cleared = place
            break
    if cleared is not None:
        return "refuted", (
            f"the gradients the first `{step_text}` applied were cleared before the second: "
            f".grad None or zero for all {count} it updated {cleared}"
        ) + suffix
    second = events[two][2]
    mask = [k and g2 is not None for k, (_, g2) in zip(kept, second)]
    before = _norm([g for (_, g), k in zip(applied, mask) if k])
    after = _norm([g for (_, g), k in zip(second, mask) if k])
    added = _norm([g2 - g1 for (_, g1), (_, g2), k in zip(applied, second, mask) if k])
    share = f"{sum(mask)} of the {count}" if sum(mask) < total else {1: "the one parameter", 2: "both parameters"}.get(total, f"all {count}")
    untouched = all(
        torch.equal(g1, g0) for (_, g0), (_, g1), k in zip(applied, states[0], mask) if k
    ) and between[0][2] == "before"
    # "Plus the new batch's" only when measured: what the step applied is
    # exactly what the last backward left (no clipping or scaling after it).
    afters = [e for e in between if e[2] == "after"]
    last_after = afters[-1][3][id(optimizer)] if afters and between[-1][2] == "after" else None
    as_left = last_after is not None and all(
        ga is not None and g2 is not None and torch.equal(ga, g2)
        for (_, ga), (_, g2), k in zip(last_after, second, mask) if k
    )
    still = "still held exactly the gradients" if untouched else "still held non-zero gradients, never cleared, from those"
    if untouched and as_left:
        grown = f"those plus what the backward{'s' if len(afters) > 1 else ''} in between added, unchanged up to the step"
    else:
        grown = "never cleared in between"
    details = {"first_step_norm": before, "second_step_norm": after, "added_norm": added, "stepped_parameters": total, "kept": sum(mask), "as_left_by_backward": as_left}
    return "confirmed", (
        f"before the next backward (line {between[0][1]}), {share} the first `{step_text}` updated {still} "
        f"it applied (norm {before:.4g}); the second step applied gradients of norm {after:.4g}, "
        f"{grown} (their difference has norm {added:.4g})"
    ) + suffix, details
