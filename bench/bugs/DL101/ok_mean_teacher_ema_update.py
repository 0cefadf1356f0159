# source: https://github.com/CuriousAI/mean-teacher/blob/master/pytorch/main.py
# category: DL101
# expect: clean
# evidence: the student gets gradients and trains, the EMA teacher gets none and its weights equal the exponential average of the student's weights step by step
import torch
import torch.nn as nn
import torch.nn.functional as F


def create_model(ema=False):
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    if ema:
        for param in model.parameters():
            param.detach_()
    return model


def update_ema_variables(model, ema_model, alpha, global_step):
    # Use the true average until the exponential average is more correct
    alpha = min(1 - 1 / (global_step + 1), alpha)
    for ema_param, param in zip(ema_model.parameters(), model.parameters()):
        ema_param.data.mul_(alpha).add_(param.data, alpha=1 - alpha)


def softmax_mse_loss(input_logits, target_logits):
    input_softmax = F.softmax(input_logits, dim=1)
    target_softmax = F.softmax(target_logits, dim=1)
    return F.mse_loss(input_softmax, target_softmax, reduction='sum') / input_logits.size(1)


def train(train_loader, model, ema_model, optimizer, global_step, ema_decay=0.99, consistency_weight=1.0):
    class_criterion = nn.CrossEntropyLoss()
    model.train()
    ema_model.train()
    for i, ((input, ema_input), target) in enumerate(train_loader):
        ema_model_out = ema_model(ema_input)
        model_out = model(input)
        class_loss = class_criterion(model_out, target)
        consistency_loss = consistency_weight * softmax_mse_loss(model_out, ema_model_out.detach())
        loss = class_loss + consistency_loss

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        global_step += 1
        update_ema_variables(model, ema_model, ema_decay, global_step)
    return global_step


if __name__ == "__main__":
    torch.manual_seed(0)
    model = create_model()
    ema_model = create_model(ema=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = [((torch.randn(8, 6), torch.randn(8, 6)), torch.randint(0, 3, (8,))) for _ in range(3)]

    expected = [p.detach().clone() for p in ema_model.parameters()]
    student_before = [p.detach().clone() for p in model.parameters()]
    global_step = 0
    for batch in loader:
        global_step = train([batch], model, ema_model, optimizer, global_step)
        alpha = min(1 - 1 / (global_step + 1), 0.99)
        expected = [alpha * e + (1 - alpha) * p.detach() for e, p in zip(expected, model.parameters())]

    assert all(torch.allclose(e, p, atol=1e-6) for e, p in zip(expected, ema_model.parameters()))
    assert all(not p.requires_grad and p.grad is None for p in ema_model.parameters())
    assert all(not torch.equal(b, p) for b, p in zip(student_before, model.parameters()))
    print("evidence holds: the teacher is the exact EMA of the student and receives no gradient; the student trains")
