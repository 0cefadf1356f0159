# source: https://discuss.pytorch.org/t/pytorch-gradient-accumulation/55955
# category: DL601
# expect: clean
# evidence: gradients are deliberately summed over accumulation_steps mini-batches (loss divided by accumulation_steps) and zeroed right after each optimizer step, so every update uses exactly the mean gradient of its own group of batches.
import torch
import torch.nn as nn

torch.manual_seed(0)

model = nn.Linear(5, 1)
loss_function = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
accumulation_steps = 2
training_set = [(torch.randn(4, 5), torch.randn(4, 1)) for _ in range(6)]

applied = []
spy_step = optimizer.step


def recording_step(*a, **k):
    applied.append(model.weight.grad.detach().clone())
    return spy_step(*a, **k)


optimizer.step = recording_step
snapshots = []

model.zero_grad()                                   # Reset gradients tensors
for i, (inputs, labels) in enumerate(training_set):
    snapshots.append([p.detach().clone() for p in model.parameters()])
    predictions = model(inputs)                     # Forward pass
    loss = loss_function(predictions, labels)       # Compute loss function
    loss = loss / accumulation_steps                # Normalize our loss (if averaged)
    loss.backward()                                 # Backward pass
    if (i + 1) % accumulation_steps == 0:           # Wait for several backward steps
        optimizer.step()                            # Now we can do an optimizer step
        model.zero_grad()                           # Reset gradients tensors

if __name__ == "__main__":
    assert len(applied) == len(training_set) // accumulation_steps
    # recompute the intended gradient of the first group at the weights it started from
    w, b = snapshots[0]
    expected = torch.zeros_like(w)
    for inputs, labels in training_set[:2]:
        wq = w.clone().requires_grad_()
        l = loss_function(inputs @ wq.t() + b, labels) / accumulation_steps
        expected += torch.autograd.grad(l, wq)[0]
    assert torch.allclose(applied[0], expected, atol=1e-6), "first update = mean gradient of batches 0-1"
    assert model.weight.grad is None or torch.count_nonzero(model.weight.grad) == 0
    print("evidence holds:", len(applied), "updates, each using the averaged gradient of", accumulation_steps, "batches")
