# source: https://github.com/Trusted-AI/adversarial-robustness-toolbox/issues/498
# category: DL302
# expect: flag 32, 69, 74
# evidence: the white-box PGD attack is generated inside the user's `with torch.no_grad():` evaluation block, so the classifier's loss.backward() raises "element 0 of tensors does not require grad".
import numpy as np
import torch
import torch.nn as nn


class PyTorchClassifier:
    """Minimal version of ART's PyTorchClassifier wrapper."""

    def __init__(self, model, loss, input_shape, nb_classes, clip_values=(0.0, 1.0)):
        self._model = model
        self._loss = loss
        self.input_shape = input_shape
        self.nb_classes = nb_classes
        self.clip_values = clip_values

    def predict(self, x, batch_size=128):
        self._model.eval()
        with torch.no_grad():
            out = self._model(torch.from_numpy(x))
        return out.numpy()

    def loss_gradient(self, x, y):
        x_grad = torch.from_numpy(x).requires_grad_(True)
        y_grad = torch.from_numpy(np.argmax(y, axis=1))
        model_outputs = self._model(x_grad)
        loss = self._loss(model_outputs, y_grad)
        self._model.zero_grad()
        loss.backward()
        grads = x_grad.grad.cpu().numpy().copy()
        assert grads.shape == x.shape
        return grads


class ProjectedGradientDescent:
    def __init__(self, estimator, eps=0.3, eps_step=0.1, max_iter=5, targeted=False):
        self.estimator = estimator
        self.eps, self.eps_step, self.max_iter = eps, eps_step, max_iter
        self.targeted = targeted

    def generate(self, x, y=None):
        if y is None:
            preds = self.estimator.predict(x)
            y = np.eye(self.estimator.nb_classes)[np.argmax(preds, axis=1)].astype(np.float32)
        adv_x = x.copy()
        for _ in range(self.max_iter):
            grad = self.estimator.loss_gradient(adv_x, y) * (1 - 2 * int(self.targeted))
            adv_x = adv_x + self.eps_step * np.sign(grad)
            adv_x = np.clip(adv_x, x - self.eps, x + self.eps)
            adv_x = np.clip(adv_x, *self.estimator.clip_values).astype(np.float32)
        return adv_x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def evaluate_robustness(classifier, attack, test_loader):
    correct_clean, correct_adv, total = 0, 0, 0
    with torch.no_grad():
        for data, target in test_loader:
            x = data.numpy()
            preds = classifier.predict(x)
            correct_clean += (preds.argmax(1) == target.numpy()).sum()
            x_adv = attack.generate(x=x)
            preds_adv = classifier.predict(x_adv)
            correct_adv += (preds_adv.argmax(1) == target.numpy()).sum()
            total += len(target)
    return correct_clean / total, correct_adv / total


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Net()
    criterion = nn.CrossEntropyLoss()
    classifier = PyTorchClassifier(model=model, loss=criterion, input_shape=(1, 8, 8), nb_classes=10)
    attack = ProjectedGradientDescent(classifier, eps=0.3, eps_step=0.1, max_iter=3)
    test_loader = [(torch.rand(4, 1, 8, 8), torch.randint(0, 10, (4,))) for _ in range(2)]

    try:
        evaluate_robustness(classifier, attack, test_loader)
    except RuntimeError as e:
        msg = str(e)
    else:
        raise AssertionError("expected the attack to fail inside no_grad")
    assert "does not require grad" in msg, msg

    # the same attack outside the no_grad block works
    x_adv = attack.generate(x=test_loader[0][0].numpy())
    assert np.abs(x_adv - test_loader[0][0].numpy()).max() > 0
    print("evidence holds: PGD inside `with torch.no_grad()` raised RuntimeError: %s" % msg.splitlines()[0])
