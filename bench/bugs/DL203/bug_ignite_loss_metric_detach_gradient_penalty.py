# source: https://github.com/pytorch/ignite/issues/1674
# category: DL203
# expect: flag 73, 140
# evidence: after one training epoch, evaluator.run raises "element 0 of tensors does not require grad and does not have a grad_fn" inside calc_gradients_input, because Loss.update hands the loss function y_pred.detach() and y.detach().
"""
ignite 0.4.3 ignite/metrics/loss.py (Loss.update) used by DUQ's train_duq_fm.py; the Engine/Events
machinery is a minimal stand-in for ignite.engine, the model is CNN_DUQ with tiny layers.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Events:
    EPOCH_STARTED, ITERATION_COMPLETED, EPOCH_COMPLETED = "epoch_started", "iteration_completed", "epoch_completed"


class State:
    def __init__(self):
        self.metrics, self.output, self.epoch = {}, None, 0


class Engine:
    def __init__(self, process_function):
        self._process_function = process_function
        self._handlers = {Events.EPOCH_STARTED: [], Events.ITERATION_COMPLETED: [], Events.EPOCH_COMPLETED: []}
        self.state = State()

    def add_event_handler(self, event_name, handler, *args):
        self._handlers[event_name].append((handler, args))

    def on(self, event_name):
        def decorator(f):
            self.add_event_handler(event_name, f)
            return f
        return decorator

    def _fire_event(self, event_name):
        for handler, args in self._handlers[event_name]:
            handler(self, *args)

    def run(self, data, max_epochs=1):
        for _ in range(max_epochs):
            self.state.epoch += 1
            self._fire_event(Events.EPOCH_STARTED)
            for batch in data:
                self.state.output = self._process_function(self, batch)
                self._fire_event(Events.ITERATION_COMPLETED)
            self._fire_event(Events.EPOCH_COMPLETED)
        return self.state


class Loss:
    """Calculates the average loss according to the passed loss_fn (ignite 0.4.3)."""
    required_output_keys = None

    def __init__(self, loss_fn, output_transform=lambda x: x, batch_size=lambda x: len(x), device="cpu"):
        self._loss_fn = loss_fn
        self._output_transform = output_transform
        self._batch_size = batch_size
        self._device = torch.device(device)

    def reset(self):
        self._sum = torch.tensor(0.0, device=self._device)
        self._num_examples = 0

    def update(self, output):
        if len(output) == 2:
            y_pred, y = output
            kwargs = {}
        else:
            y_pred, y, kwargs = output
        average_loss = self._loss_fn(y_pred.detach(), y.detach(), **kwargs)
        if len(average_loss.shape) != 0:
            raise ValueError("loss_fn did not return the average loss.")
        n = self._batch_size(y)
        self._sum += average_loss.to(self._device) * n
        self._num_examples += n

    def compute(self):
        return self._sum.item() / self._num_examples

    def started(self, engine):
        self.reset()

    def iteration_completed(self, engine):
        self.update(self._output_transform(engine.state.output))

    def completed(self, engine, name):
        engine.state.metrics[name] = self.compute()

    def attach(self, engine, name):
        engine.add_event_handler(Events.EPOCH_STARTED, self.started)
        engine.add_event_handler(Events.ITERATION_COMPLETED, self.iteration_completed)
        engine.add_event_handler(Events.EPOCH_COMPLETED, self.completed, name)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.fc1 = nn.Linear(8 * 4 * 4, 16)

    def compute_features(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2, 2)
        return F.relu(self.fc1(x.flatten(1)))


class CNN_DUQ(Model):
    def __init__(self, num_classes, embedding_size, learnable_length_scale, length_scale, gamma):
        super().__init__()
        self.gamma = gamma
        self.W = nn.Parameter(torch.normal(torch.zeros(embedding_size, num_classes, 16), 0.05))
        self.register_buffer("N", torch.ones(num_classes) * 12)
        self.register_buffer("m", torch.normal(torch.zeros(embedding_size, num_classes), 1))
        self.m = self.m * self.N.unsqueeze(0)
        self.sigma = length_scale

    def update_embeddings(self, x, y):
        z = self.last_layer(self.compute_features(x))
        self.N = self.gamma * self.N + (1 - self.gamma) * y.sum(0)
        features_sum = torch.einsum("ijk,ik->jk", z, y)
        self.m = self.gamma * self.m + (1 - self.gamma) * features_sum

    def last_layer(self, z):
        return torch.einsum("ij,mnj->imn", z, self.W)

    def output_layer(self, z):
        embeddings = self.m / self.N.unsqueeze(0)
        diff = z - embeddings.unsqueeze(0)
        return (-(diff ** 2)).mean(1).div(2 * self.sigma ** 2).exp()

    def forward(self, x):
        z = self.last_layer(self.compute_features(x))
        return self.output_layer(z)


def calc_gradients_input(x, y_pred):
    gradients = torch.autograd.grad(outputs=y_pred, inputs=x, grad_outputs=torch.ones_like(y_pred),
                                    create_graph=True)[0]
    return gradients.flatten(start_dim=1)


def calc_gradient_penalty(x, y_pred):
    gradients = calc_gradients_input(x, y_pred)
    grad_norm = gradients.norm(2, dim=1)  # L2 norm
    return ((grad_norm - 1) ** 2).mean()  # Two sided penalty


if __name__ == "__main__":
    torch.manual_seed(0)
    num_classes, l_gradient_penalty = 4, 0.05
    model = CNN_DUQ(num_classes, embedding_size=8, learnable_length_scale=False, length_scale=0.1, gamma=0.999)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    dl_train = [(torch.randn(4, 1, 8, 8), torch.randint(0, num_classes, (4,))) for _ in range(3)]
    dl_test = [(torch.randn(4, 1, 8, 8), torch.randint(0, num_classes, (4,))) for _ in range(2)]

    def step(engine, batch):
        model.train()
        optimizer.zero_grad()
        x, y = batch
        y = F.one_hot(y, num_classes=num_classes).float()
        x.requires_grad_(True)
        y_pred = model(x)
        loss = F.binary_cross_entropy(y_pred, y)
        loss += l_gradient_penalty * calc_gradient_penalty(x, y_pred)
        x.requires_grad_(False)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            model.update_embeddings(x, y)
        return loss.item()

    def eval_step(engine, batch):
        model.eval()
        x, y = batch
        y = F.one_hot(y, num_classes=num_classes).float()
        x.requires_grad_(True)
        y_pred = model(x)
        return y_pred, y, x

    def output_transform_bce(output):
        y_pred, y, x = output
        return y_pred, y

    def output_transform_gp(output):
        y_pred, y, x = output
        return x, y_pred

    trainer = Engine(step)
    evaluator = Engine(eval_step)
    metric = Loss(F.binary_cross_entropy, output_transform=output_transform_bce)
    metric.attach(evaluator, "bce")
    metric = Loss(calc_gradient_penalty, output_transform=output_transform_gp)
    metric.attach(evaluator, "gradient_penalty")

    @trainer.on(Events.EPOCH_COMPLETED)
    def log_results(trainer):
        evaluator.run(dl_test)
        metrics = evaluator.state.metrics
        print("Test Results - Epoch: {} BCE: {:.2f} GP: {:.2f}".format(
            trainer.state.epoch, metrics["bce"], metrics["gradient_penalty"]))

    try:
        trainer.run(dl_train, max_epochs=1)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised is not None and "does not require grad and does not have a grad_fn" in raised, raised
    print("evidence holds: evaluator's gradient_penalty metric fails with:", raised)
