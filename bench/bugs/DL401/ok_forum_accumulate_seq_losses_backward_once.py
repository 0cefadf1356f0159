# source: https://discuss.pytorch.org/t/gpu-memory-increase-while-i-wanna-to-backward-with-accumulative-loss/43284
# category: DL401
# expect: clean
# evidence: per batch, the loss of each variable-length sequence is summed into `loss` on purpose and backpropagated once; the accumulator is rebuilt every batch, gradients reach the parameters and the weights change.
import torch
import torch.nn as nn

torch.manual_seed(0)

model = nn.GRU(input_size=3, hidden_size=8, batch_first=True)
head = nn.Linear(8, 1)
criteria = nn.MSELoss()
optimizer = torch.optim.SGD(list(model.parameters()) + list(head.parameters()), lr=0.1)

# a "batch" holds sequences of different lengths, so each one is run separately
batches = [[(torch.randn(1, L, 3), torch.randn(1, 1)) for L in (4, 7, 5)] for _ in range(3)]

w0 = head.weight.detach().clone()
step_losses = []
for batch in batches:
    optimizer.zero_grad()
    loss = 0
    n = len(batch)
    for i in range(n):
        seq_i, target_i = batch[i]
        out, h = model(seq_i)
        loss_part = criteria(head(out[:, -1]), target_i)
        loss += loss_part
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
    optimizer.step()
    step_losses.append(loss.item())

if __name__ == "__main__":
    assert not torch.equal(w0, head.weight.detach()), "the accumulated loss trained the model"
    assert isinstance(loss, torch.Tensor) and len(step_losses) == 3
    print("evidence holds: summed per-sequence losses backpropagated once per batch:", [round(l, 3) for l in step_losses])
