"""Which modules each optimizer steps, so "meant to train" has a fact behind it.

`self.encoder_opt = torch.optim.Adam(self.encoder.parameters(), lr=lr)`
makes `self.encoder_opt` own `self.encoder`; so do parameter groups
(`[{"params": self.actor.parameters()}, ...]`), `itertools.chain(...)` and
concatenated lists of `.parameters()`. Optimizers stored on `self` belong to
their class and to the classes of the file that inherit from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, FrozenSet, List, Optional, Set, Tuple

import libcst as cst

from detachlint.analysis.names import dotted

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis import Facts

ALL = "*"  # a whole instance: every member
UNKNOWN_PART = "?"  # an optimizer of another file whose parameters are not known


def owner_part(owner: cst.BaseExpression) -> Tuple[Optional[cst.Name], str]:
    """The instance and the member `model.head.fc` names: (`model`, "head");
    (`model`, ALL) for `model` itself; (None, ...) for anything else."""
    chain: List[str] = []
    root = owner
    while isinstance(root, cst.Attribute):
        chain.append(root.attr.value)
        root = root.value
    return (root if isinstance(root, cst.Name) else None), (chain[-1] if chain else ALL)


class Optimizers:
    def __init__(self, facts: "Facts") -> None:
        self.facts = facts
        # (class or None, optimizer text) -> modules it steps
        self._owned: Dict[Tuple[Optional[cst.ClassDef], str], FrozenSet[str]] = {}
        self._stepped: Optional[FrozenSet[str]] = None
        self._synced: Optional[FrozenSet[str]] = None
        self._handed: Dict[tuple, FrozenSet[str]] = {}
        # [parts] once read, [] when some optimizer's parameters are not known.
        self._parts: Optional[list] = None
        for assign in facts.index.nodes(cst.Assign):
            value = assign.value
            if not isinstance(value, cst.Call) or not (facts.names.qualified(value.func) or "").startswith("torch.optim."):
                continue
            modules = self._modules_in(value)
            if not modules:
                continue
            modules |= self._also_held_as(modules, assign)
            klass = facts.index.enclosing(assign, cst.ClassDef)
            for target in assign.targets:
                text = dotted(target.target)
                if text is not None:
                    receiver = facts.index.receiver(assign)
                    key = (klass if receiver and text.startswith(receiver + ".") else None, text)
                    self._owned[key] = self._owned.get(key, frozenset()) | modules

    def _also_held_as(self, modules: FrozenSet[str], at: cst.CSTNode) -> FrozenSet[str]:
        """The other names the function around `at` binds the same modules
        to: `self.trunk` for `trunk` after `self.trunk = trunk`."""
        scope = self.facts.index.scope_of(at)
        found = set()
        for assign in self.facts.index.descendants(scope, cst.Assign):
            if self.facts.index.scope_of(assign) is scope and isinstance(assign.value, cst.Name) and assign.value.value in modules:
                found |= {text for text in (dotted(t.target) for t in assign.targets) if text is not None}
        return frozenset(found)

    def meant_to_train(self, owner) -> Set[str]:
        """The trainable members of module class `owner` (a `ModuleClass`)
        that training means to update: all of them, unless the optimizers
        say which (`members_stepped`)."""
        trainable = owner.trainable_members()
        stepped = self.members_stepped(owner.node)
        return trainable if stepped is None else trainable & stepped

    def members_stepped(self, klass: cst.ClassDef) -> Optional[FrozenSet[str]]:
        """The members of `klass`'s instances that the optimizers step, when
        they say so: only `head` for `SGD(model.head.parameters())` with
        `model = Probe()`, a linear probe, in this file or in another file of
        the run (`Facts.elsewhere`). None (all of them) when no
        optimizer steps part of an instance, one steps a whole instance
        (`model.parameters()`, `self.parameters()`), or one's parameters are
        not known (a list built elsewhere, an object whose class is not
        known), which could be anything."""
        parts = self.stepped_parts()
        if parts is None:
            return None
        found = {member for part_class, member in parts if part_class is klass}
        if self.facts.index.parent(klass) is self.facts.index.module:
            # What the optimizers of the run's other files step of it.
            found |= self.facts.elsewhere.stepped.get(klass.name.value, frozenset())
        if not found or ALL in found or UNKNOWN_PART in found:
            return None
        return frozenset(found)

    def stepped_parts(self) -> Optional[List[Tuple[cst.ClassDef, str]]]:
        """(class, member) for every `X.m.parameters()` in the first argument
        of the file's optimizers, where `X` is `self` in a class or a name
        whose class of this file `values.class_passed` knows; ALL for a
        whole instance (`X.parameters()`). None when some optimizer's
        parameters cannot be read that way."""
        if self._parts is None:
            owners = self.parameter_owners()
            found = [self._part(owner) for owner in owners or ()]
            self._parts = [found] if owners is not None and None not in found else []
        return self._parts[0] if self._parts else None

    def parameter_owners(self) -> Optional[List[cst.BaseExpression]]:
        """`X` of every `X.parameters()` (or `named_parameters()`) in the first
        argument of the file's optimizers (`torch.optim.SGD(model.head.parameters())`:
        `model.head`); None when an optimizer's parameters come another way
        (a list built elsewhere)."""
        owners: List[cst.BaseExpression] = []
        for call in self.facts.index.nodes(cst.Call):
            name = self.facts.names.qualified(call.func) or ""
            if not (name.startswith("torch.optim.") and name.count(".") == 2 and name[12:13].isupper()):
                continue  # not an optimizer (`torch.optim.lr_scheduler.StepLR`)
            found = self._owners_in(call)
            if not found:
                return None
            owners.extend(found)
        return owners

    def _part(self, owner: cst.BaseExpression) -> Optional[Tuple[cst.ClassDef, str]]:
        """(class, member) that `model.head` (or `self.head`, or `model`) names."""
        root, member = owner_part(owner)
        if root is None:
            return None
        if self.facts.index.is_receiver(root):
            klass = self.facts.index.enclosing(owner, cst.ClassDef)
        else:
            klass = self.facts.values.class_passed(root)
        return (klass, member) if klass is not None else None

    def _owners_in(self, call: cst.Call) -> List[cst.BaseExpression]:
        """`X` of every `X.parameters()` (or `X.named_parameters()`) in the
        optimizer's first argument."""
        first = next((arg.value for arg in call.args if arg.keyword is None or arg.keyword.value == "params"), None)
        if first is None:
            return []
        return [
            inner.func.value
            for inner in [first, *self.facts.index.descendants(first, cst.Call)]
            if isinstance(inner, cst.Call)
            and isinstance(inner.func, cst.Attribute)
            and inner.func.attr.value in ("parameters", "named_parameters")
        ]

    def _modules_in(self, call: cst.Call) -> FrozenSet[str]:
        """`X` of every `X.parameters()` in the optimizer's first argument, as written."""
        return frozenset(name for name in map(dotted, self._owners_in(call)) if name is not None)

    def stepped_by(self, optimizer: str, at: cst.CSTNode) -> FrozenSet[str]:
        """The modules the optimizer named `optimizer` (as written at `at`) steps."""
        receiver = self.facts.index.receiver(at)
        if not (receiver and optimizer.startswith(receiver + ".")):
            owned = self._owned.get((None, optimizer), frozenset())
            return owned or self._handed_in(optimizer, at)
        for klass in self.facts.intent.class_chain(self.facts.index.enclosing(at, cst.ClassDef)):
            owned = self._owned.get((klass, optimizer))
            if owned:
                return owned
        return frozenset()

    def _handed_in(self, optimizer: str, at: cst.CSTNode, depth: int = 0) -> FrozenSet[str]:
        """For an optimizer that is a parameter of the function around `at`:
        what the optimizers its callers pass step, named as the function
        names them (`fit(enc, head, SGD([*enc.parameters(), ...]))` steps
        `encoder` inside `def fit(encoder, head, opt)`)."""
        function = self.facts.index.scope_of(at)
        if depth > 2 or not isinstance(function, cst.FunctionDef):
            return frozenset()
        key = (function, optimizer)
        if key in self._handed:
            return self._handed[key]
        self._handed[key] = frozenset()  # while the callers are followed
        found: Set[str] = set()
        for call in self.facts.values.call_sites(function):
            bound = self.facts.intent.bound_arguments(call, function)
            passed = bound.get(optimizer)
            if passed is None:
                continue
            if isinstance(passed, cst.Call) and (self.facts.names.qualified(passed.func) or "").startswith("torch.optim."):
                owned = self._modules_in(passed)
            else:
                text = dotted(passed)
                owned = self.stepped_by(text, call) if text else frozenset()
                if not owned and isinstance(passed, cst.Name):
                    owned = self._handed_in(passed.value, call, depth + 1)
            # Back to the function's own names: the parameter each module was passed as.
            as_named = {dotted(value): name for name, value in bound.items() if dotted(value)}
            found |= {as_named.get(module, module) for module in owned}
        self._handed[key] = frozenset(found)
        return self._handed[key]

    def stepped_modules(self) -> FrozenSet[str]:
        """Modules (as written) some optimizer step of the file updates:
        those its optimizer owns (`opt.step()` with `opt = Adam(net.parameters())`)
        and `net` for an optimizer kept on the module itself (`net.optimizer.step()`)."""
        if self._stepped is None:
            found = set()
            for call in self.facts.index.nodes(cst.Call):
                func = call.func
                if not isinstance(func, cst.Attribute) or func.attr.value != "step":
                    continue
                name = dotted(func.value)
                if name is None:
                    continue
                found |= self.stepped_by(name, call)
                if "." in name:
                    found.add(name.rsplit(".", 1)[0])
            self._stepped = frozenset(found)
        return self._stepped

    def synced_copies(self) -> FrozenSet[str]:
        """Target networks: modules that take another module's weights
        outside `__init__` (`self.q_next.load_state_dict(self.q_eval.state_dict())`,
        run every few steps) and that no optimizer of the file steps. They are
        updated by copying, never by gradients."""
        if self._synced is None:
            found = set()
            index = self.facts.index
            for call in index.nodes(cst.Call):
                func = call.func
                if not isinstance(func, cst.Attribute) or func.attr.value != "load_state_dict" or not call.args:
                    continue
                source = call.args[0].value
                if not (
                    isinstance(source, cst.Call)
                    and isinstance(source.func, cst.Attribute)
                    and source.func.attr.value == "state_dict"
                ):
                    continue
                copy, original = dotted(func.value), dotted(source.func.value)
                function = index.enclosing(call, cst.FunctionDef)
                if copy is None or original is None or copy == original:
                    continue
                if function is None or function.name.value == "__init__":
                    continue  # a one-off copy at set-up, not a periodic sync
                found.add(copy)
            self._synced = frozenset(found) - self.stepped_modules()
        return self._synced

    def steps_in(self, function: cst.CSTNode) -> List[Tuple[cst.Call, FrozenSet[str]]]:
        """`opt.step()` calls in `function` (or at the module level of a
        script), each with the modules it steps."""
        found = []
        for call in self.facts.index.calls_in(function):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "step" and not call.args:
                name = dotted(func.value)
                if name is not None:
                    owned = self.stepped_by(name, call)
                    if owned:
                        found.append((call, owned))
        return found

    def stepped_after_return(self, node: cst.CSTNode) -> Optional[FrozenSet[str]]:
        """Lightning's automatic optimization: the modules the optimizers
        step after `training_step(self, batch, batch_idx, optimizer_idx)`
        returns a loss computed at `node`, that is those of the optimizers
        `configure_optimizers` lists at the indices the `optimizer_idx`
        tests around `node` allow (`if optimizer_idx == 0 or optimizer_idx == 1:`,
        its `else`). None when `node` is in no such step or the indices or
        the optimizers are not known."""
        index = self.facts.index
        function = index.enclosing(node, cst.FunctionDef)
        klass = index.enclosing(function, cst.ClassDef) if function is not None else None
        if function is None or klass is None or function.name.value != "training_step":
            return None
        if not any(p.name.value == "optimizer_idx" for p in function.params.params):
            return None
        listed = self._configured(klass)
        if not listed:
            return None
        allowed = set(range(len(listed)))
        child: cst.CSTNode = node
        for ancestor in index.ancestors(node):
            if ancestor is function:
                break
            if isinstance(ancestor, cst.If) and child is not ancestor.test:
                tested = _indices(ancestor.test, len(listed))
                if tested is None:
                    return None
                allowed &= tested if child is ancestor.body else set(range(len(listed))) - tested
            child = ancestor
        found: set = set()
        for i in allowed:
            found |= listed[i]
        return frozenset(found)

    def _configured(self, klass: cst.ClassDef) -> List[FrozenSet[str]]:
        """What each optimizer `configure_optimizers` returns in its list steps
        (`return [enc_optim, g_optim, d_optim], []`); empty when not known."""
        for owner in self.facts.intent.class_chain(klass):
            method = next((f for f in owner.body.body if isinstance(f, cst.FunctionDef) and f.name.value == "configure_optimizers"), None)
            if method is None:
                continue
            returns = [r for r in self.facts.index.descendants(method.body, cst.Return) if r.value is not None]
            if len(returns) != 1:
                return []
            value = returns[0].value
            if isinstance(value, cst.Tuple) and value.elements and isinstance(value.elements[0].value, (cst.List, cst.Tuple)):
                value = value.elements[0].value
            if not isinstance(value, (cst.List, cst.Tuple)):
                return []
            listed = []
            for element in value.elements:
                name = dotted(element.value)
                owned = self.stepped_by(name, returns[0]) if name is not None else frozenset()
                if not owned:
                    return []
                listed.append(owned)
            return listed
        return []


def _indices(test: cst.BaseExpression, count: int) -> Optional[set]:
    """The optimizer indices for which `test` on `optimizer_idx` holds."""
    every = set(range(count))
    if isinstance(test, cst.BooleanOperation):
        left, right = _indices(test.left, count), _indices(test.right, count)
        if left is None or right is None:
            return None
        return left | right if isinstance(test.operator, cst.Or) else left & right
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _indices(test.expression, count)
        return None if inner is None else every - inner
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    if not (isinstance(test.left, cst.Name) and test.left.value == "optimizer_idx"):
        return None
    target = test.comparisons[0]
    operator = target.operator
    if isinstance(target.comparator, cst.Integer):
        k = int(target.comparator.value)
        if isinstance(operator, cst.Equal):
            return {k} & every
        if isinstance(operator, cst.NotEqual):
            return every - {k}
    if isinstance(operator, (cst.In, cst.NotIn)) and isinstance(target.comparator, (cst.Tuple, cst.List, cst.Set)):
        values = {int(e.value.value) for e in target.comparator.elements if isinstance(e.value, cst.Integer)}
        if len(values) != len(target.comparator.elements):
            return None
        return values & every if isinstance(operator, cst.In) else every - values
    return None

