from __future__ import annotations

from typing import Optional

import libcst as cst

from detachlint.analysis import Holds
from detachlint.analysis.intent import is_evaluation_name
from detachlint.analysis.model_calls import Loop, ModelCalls
from detachlint.analysis.names import dotted
from detachlint.analysis.vocabulary import GRAD_MODE_MANAGERS, STORING_METHODS
from detachlint.rule import Invalid, Replace, Rule



class EvalLoopWithoutNoGrad(Rule):
    """Evaluation loop that records autograd graphs for nothing.

    ## What it does
    Flags the model call in a loop that evaluates: after `model.eval()`, or
    in a function whose name says it evaluates, validates, tests, predicts or
    infers, when nothing in the function asks for gradients and no
    `torch.no_grad()`, `torch.inference_mode()` or
    `torch.set_grad_enabled(False)` is active. The loop may reach the model
    through functions and methods of the file (`self._predict(batch)`,
    `model.predict(x)` running the model class's own `predict`); the model
    may be in eval mode for life (a wrapper whose `__init__` calls
    `self.eval()` and that never trains). Also flagged: the call of a helper
    whose own loop runs the model it is handed, made after `model.eval()`
    (`run_epoch(model, val_loader)`) when the helper asks for no gradient on
    that call (its `if optimizer is not None: loss.backward()` is dead for
    `optimizer=None`), in the same file or in another file of the run (a
    helper of `utils.py` that asks for no gradient at all); and a loop that
    trains and validates on a flag (`if is_train: model.train() else:
    model.eval()`) whose every backward sits under `if is_train:`, so the
    validation pass records graphs.

    ## Why is this bad?
    `model.eval()` only changes dropout and batch norm; it does not turn
    autograd off. Every batch builds a full graph and keeps its saved
    activations until the outputs die: evaluation runs slower, needs several
    times the memory, and runs out of it when outputs are collected in a list.

    ## Example
    ```python
    import torch

    def evaluate(model, loader):
        model.eval()
        correct = 0
        for images, labels in loader:
            logits = model(images)
            correct += (logits.argmax(1) == labels).sum().item()
        return correct
    ```

    Use instead:
    ```python
    import torch

    def evaluate(model, loader):
        model.eval()
        correct = 0
        with torch.inference_mode():
            for images, labels in loader:
                logits = model(images)
                correct += (logits.argmax(1) == labels).sum().item()
        return correct
    ```

    ## Not flagged
    - A loop that builds the module it calls on every pass (a shape or
      unit check of a fresh layer): no trained model is evaluated.
    - A model whose class freezes all its parameters in its own `__init__`
      (`self.requires_grad_(False)`): it records no graph on data.
    - Code that runs only with autograd off: under `if not
      torch.is_grad_enabled():`, or after a guard that stops otherwise
      (`if torch.is_grad_enabled(): raise ...`, `assert not
      torch.is_grad_enabled()`).
    - A loop under `torch.no_grad()`, `torch.inference_mode()` or
      `torch.set_grad_enabled(False)`, or in a function decorated with them
      (bare `@torch.no_grad` too), or whose every caller calls it under one
      of them: in the same file, and in the other files of the run
      (`evaluate()` of `utils.py` called in `train.py` under `no_grad`).
    - A function that asks for gradients: `.backward()`,
      `torch.autograd.grad`, an optimizer step or `requires_grad_()` on the
      inputs (saliency maps, adversarial evaluation, MC-dropout with input
      gradients), also through a helper or a method of the file
      (`agent.update(batch)`), unless the call rules its backward out with
      a literal argument.
    - A helper with its own loop called after `model.eval()` under
      `torch.no_grad()`, or one that sets the grad mode itself
      (`torch.set_grad_enabled(optimizer is not None)`).
    - A train-and-validate loop on a flag whose forward runs under
      `torch.set_grad_enabled(is_train)`.
    - A wrapper switched to eval in `__init__` whose class also trains or
      calls `.train()`.
    - Calls that are not a torch model's forward, such as HF `generate`
      (which disables gradients itself).
    - Test code (test files, `test_*` functions, `Test*` and `TestCase`
      classes), and Lightning's `validation_step`-style hooks, which
      Lightning runs under no_grad.
    - `torch.set_grad_enabled(flag)` with a flag known only at run time, and
      a model switched to eval mode in only one branch of an `if`.
    - A method whose name alone says it runs inference (no `.eval()` call)
      and that calls `self.model` or the module's own layers: pipelines,
      trainers and modules' inference paths are called under no_grad by
      their framework.

    ## Fix safety
    The fix wraps the loop in `with torch.inference_mode():` (adding
    `import torch` when the file lacks it). It is safe when the loop's
    tensors die with it: the loop only accumulates numbers. When results
    are collected or returned it is unsafe: tensors made in inference mode
    cannot later be saved for backward or edited in place outside it.

    ## Verification
    The probe runs the loop with the model and reports, for the first calls
    on the finding's line, `out.requires_grad`, the `grad_fn` and the bytes
    of saved tensors each call kept alive; confirmed when they are above
    zero. A `model.forward(x)` call counts as a call of the model; a method
    of the file called on the line (`model.predict(x)`) counts as one step,
    with the graph of the model calls it makes. A loop in script code runs as the script does, on synthesized
    batches for its data. A loop that cannot run (a model the file does not
    define, inputs the verifier cannot build) is inconclusive, with the reason.

    ## References
    - PyTorch docs, "Autograd mechanics": locally disabling gradient computation.
    """

    code = "DL301"
    name = "eval-loop-without-no-grad"
    fix_title = "Wrap the loop in `torch.inference_mode()`"
    message = "`{model}` runs with autograd on in this evaluation loop{through}: every batch records a graph and keeps its activations alive until the outputs are freed"
    harm = "waste"
    default_enabled = True

    valid = [
        # One loop for both phases: the grad-mode manager is chosen by the phase.
        """
        import torch
        from torch import nn

        def run_epoch(net, loader, optimizer=None):
            training = optimizer is not None
            net.train(training)
            total = 0.0
            with (torch.enable_grad() if training else torch.no_grad()):
                for x, y in loader:
                    loss = nn.functional.cross_entropy(net(x), y)
                    if training:
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    total += loss.item()
            return total

        net = nn.Linear(4, 3)
        data = [(torch.randn(8, 4), torch.randint(0, 3, (8,)))]
        run_epoch(net, data, torch.optim.SGD(net.parameters(), lr=0.1))
        run_epoch(net, data)
        """,
        # Outputs gathered over the loop, then backpropagated once after it: training.
        """
        import torch
        from torch import nn

        def fit(net, opt, chunks):
            outs = []
            for x in chunks:
                outs.append(net(x))
            loss = torch.cat(outs).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()

        if __name__ == "__main__":
            net = nn.Linear(3, 1)
            fit(net, torch.optim.SGD(net.parameters(), lr=0.1), [torch.randn(2, 3) for _ in range(3)])
        """,
        # Frozen for life by its own constructor: no graph is recorded.
        """
        import torch
        from torch import nn

        class FeatureExtractor(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
                self.requires_grad_(False)

            def forward(self, x):
                return self.net(x)

        extractor = FeatureExtractor()
        extractor.eval()
        features = [extractor(batch) for batch in torch.randn(5, 4, 16)]
        for batch in torch.randn(5, 4, 16):
            features.append(extractor(batch))
        """,
        # The function refuses to run with autograd on.
        """
        import torch

        def evaluate(model, loader):
            if torch.is_grad_enabled():
                raise RuntimeError("evaluate() must be called under torch.no_grad()")
            model.eval()
            predictions = []
            for x in loader:
                predictions.append(model(x))
            return torch.cat(predictions)
        """,
        # Same, as an assertion.
        """
        import torch

        def evaluate(model, loader):
            assert not torch.is_grad_enabled(), "call under torch.no_grad()"
            model.eval()
            outputs = []
            for x in loader:
                outputs.append(model(x))
            return outputs
        """,
        # The loop is under no_grad.
        """
        import torch

        def evaluate(model, loader):
            model.eval()
            with torch.no_grad():
                for x, y in loader:
                    out = model(x)
        """,
        # Bare decorator.
        """
        import torch

        @torch.no_grad
        def validate(model, loader):
            model.eval()
            for x, y in loader:
                out = model(x)
        """,
        # Saliency: the loop asks for input gradients.
        """
        import torch

        def saliency(model, loader):
            model.eval()
            maps = []
            for x, y in loader:
                x.requires_grad_()
                score = model(x).gather(1, y[:, None]).sum()
                score.backward()
                maps.append(x.grad.abs())
            return maps
        """,
        # Every caller in the file runs it under no_grad.
        """
        import torch

        def run_eval(model, loader):
            model.eval()
            for x in loader:
                model(x)

        def main(model, loader):
            with torch.no_grad():
                run_eval(model, loader)
        """,
        # HF generate disables gradients itself.
        """
        def predict(model, tokenizer, prompts):
            model.eval()
            texts = []
            for prompt in prompts:
                ids = tokenizer(prompt, return_tensors="pt").input_ids
                texts.append(model.generate(ids))
            return texts
        """,
        # The classic train/val loop with a run-time flag.
        """
        import torch

        def train_model(model, loaders, criterion, optimizer):
            for phase in ["train", "val"]:
                if phase == "train":
                    model.train()
                else:
                    model.eval()
                for inputs, labels in loaders[phase]:
                    with torch.set_grad_enabled(phase == "train"):
                        outputs = model(inputs)
        """,
        # A pipeline method: the framework calls it under no_grad.
        """
        import torch

        class TablePipeline:
            def sequential_inference(self, batches):
                outputs = []
                for batch in batches:
                    outputs.append(self.model(**batch))
                return outputs
        """,
        # Eval mode in only one branch: which mode runs is decided at run time.
        """
        import torch

        def run_inference(model, batches, train_mode):
            if train_mode:
                model = model.train()
            else:
                model = model.eval()
            for batch in batches:
                model(batch)
        """,
        # A helper's loop called after `eval()`, under no_grad.
        """
        import torch

        def run_epoch(model, loader, criterion, optimizer=None):
            total = 0.0
            for x, y in loader:
                loss = criterion(model(x), y)
                if optimizer is not None:
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                total += loss.item()
            return total

        def main(model, train_loader, val_loader, criterion, optimizer):
            for epoch in range(10):
                model.train()
                run_epoch(model, train_loader, criterion, optimizer)
                model.eval()
                with torch.no_grad():
                    val_loss = run_epoch(model, val_loader, criterion)
        """,
        # The helper sets the grad mode from its own flag.
        """
        import torch

        def run_epoch(model, loader, criterion, optimizer=None):
            for x, y in loader:
                with torch.set_grad_enabled(optimizer is not None):
                    loss = criterion(model(x), y)
                if optimizer is not None:
                    loss.backward()
                    optimizer.step()

        def main(model, val_loader, criterion):
            model.eval()
            run_epoch(model, val_loader, criterion)
        """,
        # Train and validate on a flag, with the forward under set_grad_enabled.
        """
        import torch

        def train_and_valid(model, optimizer, loader, is_train=True):
            if is_train:
                model.train()
            else:
                model.eval()
            for x, y in loader:
                with torch.set_grad_enabled(is_train):
                    loss = torch.nn.functional.mse_loss(model(x), y)
                if is_train:
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
        """,
        # Switched to eval in `__init__`, but the class trains too.
        """
        import torch
        from torch import nn

        class Finetuner(nn.Module):
            def __init__(self, net):
                super().__init__()
                self.net = net
                self.eval()

            def forward(self, x):
                return self.net(x)

            def adapt(self, batches, optimizer):
                self.train()
                for x, y in batches:
                    loss = (self.forward(x) - y).pow(2).mean()
                    loss.backward()
                    optimizer.step()
        """,
        # A unittest case.
        """
        import unittest
        import torch

        class ModelTest(unittest.TestCase):
            def check_outputs(self, model, inputs):
                model.eval()
                for x in inputs:
                    self.assertEqual(model(x).shape[0], x.shape[0])
        """,
        # A pytest test.
        """
        import torch

        def test_forward_shapes():
            model = torch.nn.Linear(4, 2)
            model.eval()
            for batch in [torch.randn(3, 4), torch.randn(5, 4)]:
                assert model(batch).shape[1] == 2
        """,
        # A fresh module built on every pass: a shape check, no trained model evaluated.
        """
        import torch
        from torch import nn

        def check_output_lengths(sizes):
            for kernel, stride in sizes:
                conv = nn.Conv1d(3, 8, kernel, stride=stride)
                conv.eval()
                out = conv(torch.randn(2, 3, 64))
                print(out.shape[-1], (64 - kernel) // stride + 1)
        """,
    ]

    invalid = [
        # Nothing is named for evaluation and no `.eval()` is called: the loop backpropagates nothing
        # of a model the program trains, and its outputs are kept.
        Invalid(
            """
            import torch
            from torch import nn

            def fit(f, opt, pairs):
                for x, y in pairs:
                    opt.zero_grad()
                    nn.functional.mse_loss(f(x), y).backward()
                    opt.step()

            def collect(f, xs):
                return [f(x) for x in xs]

            if __name__ == "__main__":
                f = nn.Linear(3, 1)
                fit(f, torch.optim.SGD(f.parameters(), lr=0.1), [(torch.randn(2, 3), torch.randn(2, 1))])
                kept = collect(f, [torch.randn(2, 3) for _ in range(4)])
            """,
            line=11,
            message="`f` runs with autograd on in this evaluation loop",
        ),
        Invalid(
            """
            import torch

            def evaluate(model, loader):
                model.eval()
                correct = 0
                for images, labels in loader:
                    logits = model(images)
                    correct += (logits.argmax(1) == labels).sum().item()
                return correct
            """,
            line=7,
            column=18,
            message="`model` runs with autograd on",
            fixed="""
            import torch

            def evaluate(model, loader):
                model.eval()
                correct = 0
                with torch.inference_mode():
                    for images, labels in loader:
                        logits = model(images)
                        correct += (logits.argmax(1) == labels).sum().item()
                return correct
            """,
        ),
        Invalid(
            """
            from torch import nn

            class Trainer:
                def __init__(self, model: nn.Module):
                    self.model = model

                def validate(self, loader):
                    self.model.eval()
                    predictions = []
                    for batch in loader:
                        predictions.append(self.model(batch))
                    return predictions
            """,
            line=11,
            message="`self.model`",
        ),
        Invalid(
            """
            import torch
            from torch import nn

            net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
            net.load_state_dict(torch.load("net.pt"))
            net.eval()
            scores = []
            for x in torch.randn(10, 4).split(2):
                scores.append(net(x))
            """,
            line=9,
        ),
        Invalid(
            """
            import torch

            def predict(model, loader):
                outputs = []
                for x in loader:
                    outputs.append(model(x).softmax(-1))
                return torch.cat(outputs)
            """,
            line=6,
        ),
        # The loop runs the model through a method of the model class.
        Invalid(
            """
            import torch
            from torch import nn

            class Classifier(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(8, 3)

                def forward(self, x):
                    return self.body(x)

                def predict(self, x):
                    return self(x).softmax(-1)

            def run_predictions(model, loader):
                model.eval()
                preds = []
                for x in loader:
                    preds.append(model.predict(x))
                return preds
            """,
            line=19,
            message="(through `model.predict(...)`)",
        ),
        # A helper's loop called after `eval()`: its backward is dead for `optimizer=None`.
        Invalid(
            """
            import torch

            def run_epoch(model, loader, criterion, optimizer=None):
                total = 0.0
                for x, y in loader:
                    loss = criterion(model(x), y)
                    if optimizer is not None:
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    total += loss.item()
                return total

            def main(model, train_loader, val_loader, criterion, optimizer):
                for epoch in range(10):
                    model.train()
                    run_epoch(model, train_loader, criterion, optimizer)
                    model.eval()
                    val_loss = run_epoch(model, val_loader, criterion)
            """,
            line=19,
            message="(the loop of `run_epoch(...)`, line 5)",
        ),
        # Train and validate on a flag: only the backward is guarded.
        Invalid(
            """
            import torch

            def train_and_valid(model, optimizer, loader, is_train=True):
                if is_train:
                    model.train()
                else:
                    model.eval()
                total = 0.0
                for x, y in loader:
                    loss = torch.nn.functional.mse_loss(model(x), y)
                    if is_train:
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    total += loss.item()
                return total
            """,
            line=10,
            message="(when `not is_train`",
        ),
        # An inference wrapper, in eval mode from `__init__` on.
        Invalid(
            """
            import torch
            from torch import nn

            class InferenceWrapper(nn.Module):
                def __init__(self, net):
                    super().__init__()
                    self.net = net
                    self.eval()

                def forward(self, x):
                    return self.net(x)

                def run_batches(self, batches):
                    outputs = []
                    for batch in batches:
                        outputs.append(self.forward(batch))
                    return torch.cat(outputs)
            """,
            line=16,
        ),
    ]

    def __init__(self, facts) -> None:
        super().__init__(facts)
        self.calls = facts.shared("model_calls", ModelCalls)
        # Every finding needs a `.eval()`/`.train()` switch or a function
        # named for evaluation: files with neither (most) are skipped.
        self._may_evaluate = facts.intent.switches_anywhere or any(
            is_evaluation_name(function.name.value) for function in facts.index.nodes(cst.FunctionDef)
        )

    def visit_Call(self, node: cst.Call) -> None:
        """`run_epoch(model, loader)` after `model.eval()`: a helper whose own
        loop runs the model it is handed, and that asks for no gradient when
        called this way, evaluates; its loops are not checked on their own
        when its name does not say so and it switches no model itself."""
        if not self._may_evaluate:
            return
        facts = self.facts
        if (
            isinstance(node.func, cst.Name) and node.func.value == "map" and facts.names.qualified(node.func) is None
            and len(node.args) >= 2 and not facts.intent.helpers_called(node)
            and facts.values.holds(node.args[0].value) & Holds.MODEL
        ):
            self._check_comprehension(node, node.args[0].value)  # `map(net, batches)`: the model run per element
            return
        scope = facts.index.scope_of(node)
        if not facts.intent.switches_to_eval(scope) or facts.grad_mode.is_disabled(node) or facts.intent.is_test_code(node):
            return
        loop = self.calls.innermost_loop(node)
        if loop is not None and self.calls.first_in_loop(loop) is not None:
            return  # a loop that runs the model itself: checked as a loop
        helpers = facts.intent.helpers_called(node)
        if not helpers and isinstance(node.func, cst.Attribute) and facts.values.holds(node.func.value) & Holds.MODEL:
            helpers = facts.intent.methods_called(node)
        for helper in helpers:
            found = self._evaluating_loop_of(helper, node, scope)
            if found is not None:
                through = f" (the loop of `{facts.module.code_for_node(node.func)}(...)`, line {facts.line_of(found[0])})"
                self.report(node, model=found[1], through=through)
                return
        elsewhere = facts.helper_loop_of(node) if not helpers else None
        if elsewhere is not None:
            argument = elsewhere.argument(node)
            model = dotted(argument) if argument is not None else None
            if model and facts.intent.eval_switch_before(model, node, scope):
                through = f" (the loop of `{facts.module.code_for_node(node.func)}(...)`, {elsewhere.path} line {elsewhere.line})"
                self.report(node, model=model, through=through)

    def _evaluating_loop_of(self, helper: cst.FunctionDef, call: cst.Call, scope: cst.CSTNode) -> Optional[tuple]:
        """(loop, model) for a loop of `helper` that runs a model `call`
        hands it in eval mode, with every request for gradients in `helper`
        dead for this call (`if train: loss.backward()`, `train=False`)."""
        intent = self.facts.intent
        if any(not intent.dead_for_call(request, helper, call) for request in intent.gradient_requests(helper)):
            return None
        for loop, name in self.calls.helper_loops(helper):
            outer = self._caller_name(name, call, helper)
            if outer and intent.eval_switch_before(outer, call, scope):
                return loop, outer
        return None

    def visit_For(self, node: cst.For) -> None:
        self._check_loop(node)

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._check_comprehension(node, node.elt)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._check_comprehension(node, node.elt)

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._check_comprehension(node, node.elt)

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._check_comprehension(node, node.value)

    def _check_comprehension(self, node: cst.CSTNode, element: cst.BaseExpression) -> None:
        """`[net(xb) for xb in batches]`, `list(map(net, batches))`: a loop
        written as a comprehension, or as a `map` of the model itself."""
        if not self._may_evaluate:
            return
        facts = self.facts
        scope = facts.index.scope_of(node)
        if facts.intent.is_test_code(node) or facts.grad_mode.is_disabled(node):
            return
        if facts.intent.loop_computes_gradients(node, scope):
            return  # outputs gathered and backpropagated after the loop: training
        if isinstance(node, cst.Call):
            call, model = node, dotted(node.args[0].value)
            if not self.calls.records_graph(cst.Call(node.args[0].value)):
                return
        else:
            call = next(
                (c for c in [element, *facts.index.descendants(element, cst.Call)]
                 if isinstance(c, cst.Call) and self.calls.model_of(c) is not None and self.calls.records_graph(c)),
                None,
            )
            model = self.calls.model_of(call) if call is not None else None
        if call is None or not model:
            return
        named_for_evaluation = isinstance(scope, cst.FunctionDef) and is_evaluation_name(scope.name.value)
        if not (named_for_evaluation or facts.intent.switches_to_eval(scope)):
            return
        if self._evaluates(model, call, scope, named_for_evaluation):
            statement = next(a for a in facts.index.ancestors(node) if isinstance(a, (cst.SimpleStatementLine, cst.BaseCompoundStatement)))
            # Unsafe: the comprehension's results outlive the block.
            fix = self._wrap(statement, scope, unsafe=True) if isinstance(statement, cst.SimpleStatementLine) else None
            self.report(call, fix=fix, model=model, through="")

    def visit_While(self, node: cst.While) -> None:
        self._check_loop(node)

    def _asks_grad_mode(self, function) -> bool:
        """`torch.no_grad()` (or another grad-mode call) written as a statement
        in `function`, or (for None) in the module's own top-level code."""
        facts = self.facts
        statements = facts.index.descendants(function, cst.Expr) if function is not None else (
            s for s in facts.index.descendants(facts.module, cst.Expr) if facts.index.enclosing(s, cst.FunctionDef) is None
        )
        for statement in statements:
            value = statement.value
            if isinstance(value, cst.Call) and self.facts.names.qualified(value.func) in GRAD_MODE_MANAGERS:
                return True
        return False

    def finish(self) -> None:
        """The interpreter's view, whatever the code is named and wherever
        the eval switch is: a module call that ran from an entry point with
        autograd on, pass after pass of a loop that runs no backward, whose
        graph no backward used and that went nowhere detachlint cannot see."""
        facts = self.facts
        # A call the interpreter saw run, in every context, with autograd off
        # (under a decorator the file defines, a caller's `no_grad`) builds no graph.
        self.reports = [r for r in self.reports if facts.interpreter.grad_modes(r.node) != {False}]
        reported = [r.node for r in self.reports]
        for where, forward in facts.interpreter.graphs_for_nothing():
            if facts.intent.is_test_code(where) or facts.grad_mode.is_disabled(where):
                continue
            function = facts.index.enclosing(where, cst.FunctionDef)
            if self._asks_grad_mode(function) or self._asks_grad_mode(None):
                continue  # a grad mode it meant to set (a bare `torch.no_grad()` is DL304's)
            loop = self.calls.innermost_loop(where) if isinstance(where, cst.Call) else None
            if any(r is where or r is forward or (loop is not None and facts.index.is_inside(r, loop)) for r in reported):
                continue
            model = facts.module.code_for_node(forward.func)
            through = "" if where is forward else f" (through `{facts.module.code_for_node(where.func)}(...)`, line {facts.line_of(forward)})"
            self.report(where, model=model, through=through)
            reported.append(where)

    def _check_loop(self, loop: Loop) -> None:
        if not self._may_evaluate:
            return
        facts = self.facts
        scope = facts.index.scope_of(loop)
        if facts.intent.is_test_code(loop):
            return
        named_for_evaluation = isinstance(scope, cst.FunctionDef) and is_evaluation_name(scope.name.value)
        if facts.intent.loop_computes_gradients(loop, scope):
            self._check_flag_switched(loop, scope)
            return
        evaluating_scope = named_for_evaluation or facts.intent.switches_to_eval(scope)
        call = self.calls.first_in_loop(loop)
        if call is not None and self._built_each_pass(call, loop):
            return  # a fresh module per pass (a shape check): no trained model is evaluated
        if call is not None and evaluating_scope:
            model = self.calls.model_of(call)
            if self._evaluates(model, call, scope, named_for_evaluation):
                self.report(call, fix=self._wrap(loop, scope), model=model, through="")
            return
        if call is not None and facts.intent.eval_for_life(self.calls.model_of(call), call):
            self.report(call, fix=self._wrap(loop, scope), model=self.calls.model_of(call), through="")
            return
        found = self._first_helper_call(loop)
        if found is None:
            return
        call, inner, chain = found
        inner_model = self.calls.model_of(inner, chain[-1])
        # The innermost `.eval()`/`.train()` on the way to the model call
        # decides; `model` is the model as the loop's own code names it.
        state, model = self._state_along(inner_model, inner, chain)
        model = model or inner_model
        if state is None and evaluating_scope:
            state = self._evaluates(model, call, scope, named_for_evaluation)
        if state is None and facts.intent.eval_for_life(model, call):
            state = True
        if state is None and any(is_evaluation_name(h.name.value) for _, h in chain) and facts.intent.switches_to_eval(scope):
            state = True
        if state:
            through = f" (through `{facts.module.code_for_node(call.func)}(...)`)"
            self.report(call, fix=self._wrap(loop, scope), model=model, through=through)

    def _built_each_pass(self, call: cst.Call, loop: Loop) -> bool:
        """Whether the module called is constructed inside the loop itself."""
        func = call.func
        if not isinstance(func, cst.Name):
            return False
        bindings = self.facts.values.scope(call).reaching(func)
        return bool(bindings) and all(self.facts.index.is_inside(binding, loop.body) for binding, _ in bindings)

    def _check_flag_switched(self, loop: Loop, scope: cst.CSTNode) -> None:
        """A loop that trains and validates on a flag: `if is_train:
        model.train() else: model.eval()` before it, and every backward and
        step under `if is_train:`. On the evaluation path nothing asks for
        gradients, yet autograd records every batch. No fix: the loop also
        trains."""
        facts = self.facts
        for call in facts.index.descendants(loop.body, cst.Call):
            if self.calls.innermost_loop(call) is not loop or facts.grad_mode.is_disabled(call):
                continue
            model = self.calls.model_of(call)
            condition = facts.intent.eval_branch(model, loop, scope) if model else None
            if condition is None:
                continue
            training = (condition[0], not condition[1])
            if facts.intent.gradients_only_when(loop, scope, training):
                text = condition[0] if condition[1] else f"not {condition[0]}"
                self.report(call, model=model, through=f" (when `{text}`, which switched it to eval mode)")
                return

    def _state_along(self, model: str, inner: cst.Call, chain) -> tuple:
        """The eval state of `model` at `inner`, from the innermost helper of
        `chain` ((call, helper) pairs, outermost first) outwards, and the
        name the model goes by where the state was found (or in the code
        around the outermost call): `self` in `ECD.predict` is `model` for
        `model.predict(x)`, a parameter is the argument passed for it."""
        intent = self.facts.intent
        at, name = inner, model
        for position in range(len(chain) - 1, -1, -1):
            call, helper = chain[position]
            state = intent.eval_switch_before(name, at, helper)
            if state is not None:
                return state, name
            name = self._caller_name(name, call, helper)
            if name is None:
                return None, None
            at = call
        return None, name

    def _caller_name(self, name: str, call: cst.Call, helper: cst.FunctionDef) -> Optional[str]:
        """What `name` inside `helper` is called in the code that runs
        `call`; None for a local of the helper."""
        head, dot, rest = name.partition(".")
        func = call.func
        if head == self.facts.index.receiver(helper):
            if isinstance(func, cst.Attribute) and not self.facts.index.is_receiver(func.value):
                receiver = dotted(func.value)
                return receiver + dot + rest if receiver else None
            return name
        arguments = self.facts.intent.bound_arguments(call, helper)
        if head in arguments:
            receiver = dotted(arguments[head])
            return receiver + dot + rest if receiver else None
        if head in self.facts.values.scope(helper).assignments or head in self.facts.values.scope(helper).params:
            return None  # a local of the helper, or a parameter this call leaves out
        return name

    def _first_helper_call(self, loop: Loop) -> Optional[tuple]:
        """(call in the loop, model call inside the helpers, the chain of
        (call, helper)) for a function of this file the loop calls, directly
        or through one more such function, that runs a model with autograd
        on and asks for no gradient: `self._eval_step(batch)`,
        `self.validation_step(x)` calling `self.infer(x)`."""
        facts = self.facts
        for call in facts.index.descendants(loop.body, cst.Call):
            if self.calls.innermost_loop(call) is not loop or facts.grad_mode.is_disabled(call):
                continue
            found = self._model_call_in_helpers(call, depth=2)
            if found is not None:
                inner, chain = found
                return call, inner, chain
        return None

    def _model_call_in_helpers(self, call: cst.Call, depth: int) -> Optional[tuple]:
        facts = self.facts
        helpers = facts.intent.helpers_called(call)
        if not helpers and isinstance(call.func, cst.Attribute) and facts.values.holds(call.func.value) & Holds.MODEL:
            helpers = facts.intent.methods_called(call)  # `model.predict(x)`: a method of the file's model class
        for helper in helpers:
            if facts.intent.computes_gradients(helper) or facts.grad_mode.mode_at(helper.body) is not None:
                continue
            # Calls in a loop of the helper are that loop's business.
            inner_calls = [
                c for c in facts.index.descendants(helper.body, cst.Call)
                if facts.index.scope_of(c) is helper and self.calls.innermost_loop(c) is None
            ]
            for inner in inner_calls:
                if self.calls.model_of(inner, helper) is not None and not facts.grad_mode.is_disabled(inner) and self.calls.records_graph(inner):
                    return inner, [(call, helper)]
            if depth > 1:
                for inner in inner_calls:
                    if facts.grad_mode.is_disabled(inner):
                        continue
                    found = self._model_call_in_helpers(inner, depth - 1)
                    if found is not None:
                        return found[0], [(call, helper), *found[1]]
        return None

    def _wrap(self, loop: cst.BaseStatement, scope: cst.CSTNode, unsafe: Optional[bool] = None) -> Replace:
        """`with torch.inference_mode():` around the loop (or the statement), comments kept above it."""
        torch = self.facts.names.local_name("torch") or "torch"
        wrapped = cst.With(
            items=[cst.WithItem(cst.parse_expression(f"{torch}.inference_mode()"))],
            body=cst.IndentedBlock(body=[loop.with_changes(leading_lines=())]),
            leading_lines=loop.leading_lines,
        )
        unsafe = self._results_escape(loop, scope) if unsafe is None else unsafe
        return Replace(loop, wrapped, unsafe=unsafe, imports=("torch",))

    def _results_escape(self, loop: Loop, scope: cst.CSTNode) -> bool:
        """Whether tensors made in the loop may outlive it.

        Tensors created under inference mode cannot later be saved for
        backward or edited in place outside it; when results are collected
        or returned, the fix must be reviewed.
        """
        index = self.facts.index
        for call in index.descendants(loop.body, cst.Call):
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in STORING_METHODS:
                return True
        if any(True for _ in index.descendants(loop.body, cst.Yield)):
            return True
        bound = set()
        for assign in index.descendants(loop, cst.Assign):
            for target in assign.targets:
                bound.update(n.value for n in [target.target] + list(index.descendants(target, cst.Name)) if isinstance(n, cst.Name))
                if isinstance(target.target, cst.Subscript):
                    return True
        for augmented in index.descendants(loop, cst.AugAssign):
            # `total += loss`: an accumulator the loop's tensors flow into
            # (`correct += (pred == y).sum().item()` holds a number, no tensor).
            if self.facts.values.computed_without_graph(augmented.value):
                continue
            if isinstance(augmented.target, cst.Name):
                bound.add(augmented.target.value)
            else:
                return True
        for statement in index.descendants(scope, cst.Return):
            if statement.value is not None and not index.is_inside(statement, loop):
                if any(n.value in bound for n in index.descendants(statement.value, cst.Name)) or (
                    isinstance(statement.value, cst.Name) and statement.value.value in bound
                ):
                    return True
        return False

    def _evaluates(self, model: str, call: cst.Call, scope: cst.CSTNode, named_for_evaluation: bool) -> bool:
        state = self.facts.intent.eval_switch_before(model, call, scope)
        if state is not None:
            return state
        # Without `.eval()`, the function's name is the only evidence: trust it
        # for a model the function was handed (`evaluate(model, loader)`), not
        # for `self.model` or `self.layer` of a class whose framework may well
        # call it under no_grad (pipelines, trainers, a module's own layers).
        if not named_for_evaluation:
            return False
        receiver = self.facts.index.receiver(call)
        if receiver and (model == receiver or model.startswith(receiver + ".")):
            return self._trains_and_validates_itself(scope)
        return True

    def _trains_and_validates_itself(self, scope: cst.CSTNode) -> bool:
        """A class whose own code calls this method, never under no_grad,
        from a method that also trains: a trainer that validates between
        epochs. Without that, a framework may well call it under no_grad
        (pipelines), and a module's layers run wherever its caller runs."""
        facts = self.facts
        if not isinstance(scope, cst.FunctionDef) or facts.modules.class_of(scope) is not None:
            return False  # a module's own method: its layers, not a model being evaluated
        sites = facts.grad_mode.call_sites(scope)
        if not sites or any(facts.grad_mode.is_disabled(site) for site in sites):
            return False
        for site in sites:
            caller = facts.index.scope_of(site)
            if isinstance(caller, cst.FunctionDef) and (
                facts.intent.computes_gradients(caller)
                or any(facts.intent.calls_training_helper(call) for call in facts.index.descendants(caller, cst.Call))
            ):
                return True
        return False
