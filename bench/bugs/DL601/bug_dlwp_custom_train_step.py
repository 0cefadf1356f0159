# source: https://github.com/fchollet/deep-learning-with-python-notebooks/issues/293
# category: DL601
# expect: flag 55, 60
# evidence: CustomModel.train_step calls loss.backward() and applies the parameters' .grad every step but never zeroes them, so the gradient used at step 2 is the sum of step 1's and step 2's gradients.
import torch
import torch.nn as nn


class Mean:
    def __init__(self, name="loss"):
        self.name, self.total, self.count = name, 0.0, 0

    def update_state(self, value):
        self.total += float(value)
        self.count += 1

    def result(self):
        return self.total / max(self.count, 1)


class SGDApply:
    def __init__(self, learning_rate=0.1):
        self.learning_rate = learning_rate

    def apply(self, gradients, trainable_weights):
        for g, v in zip(gradients, trainable_weights):
            v -= self.learning_rate * g


loss_tracker = Mean(name="loss")


class CustomModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense1 = nn.Linear(4, 8)
        self.dense2 = nn.Linear(8, 1)
        self.optimizer = SGDApply(learning_rate=0.1)
        self.applied_gradients = []

    def forward(self, inputs):
        return self.dense2(torch.relu(self.dense1(inputs)))

    @property
    def trainable_weights(self):
        return [p for p in self.parameters() if p.requires_grad]

    def compute_loss(self, y, y_pred):
        return nn.functional.mse_loss(y_pred, y)

    def train_step(self, data):
        inputs, targets = data
        predictions = self(inputs)
        loss = self.compute_loss(y=targets, y_pred=predictions)
        loss.backward()
        trainable_weights = [v for v in self.trainable_weights]
        gradients = [v.grad for v in trainable_weights]
        self.applied_gradients.append([g.clone() for g in gradients])
        with torch.no_grad():
            self.optimizer.apply(gradients, trainable_weights)
        loss_tracker.update_state(loss.item())
        return {"loss": loss_tracker.result()}


if __name__ == "__main__":
    torch.manual_seed(0)
    model = CustomModel()
    data = (torch.randn(16, 4), torch.randn(16, 1))

    model.train_step(data)
    # the gradient step 2 *should* use: fresh gradient at the updated weights
    fresh = torch.autograd.grad(model.compute_loss(data[1], model(data[0])), model.trainable_weights)
    model.train_step(data)

    step1, step2 = model.applied_gradients
    for g1, g2, gf in zip(step1, step2, fresh):
        assert torch.allclose(g2, g1 + gf, atol=1e-6), "step-2 gradient is step-1 + fresh"
        assert not torch.allclose(g2, gf, atol=1e-6)
    print("evidence holds: step-2 applied gradient equals step-1 gradient + fresh gradient (never zeroed)")
