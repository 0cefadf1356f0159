# source: https://github.com/TIML-Group/Robust-MoE-Dual-Model/issues/2
# category: DL201
# expect: flag 21, 28
# evidence: the router's gate is in the Adam optimizer but only its argmax/topk indices reach the loss, so router.gate.weight.grad stays None and the gate never changes while the experts train.
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class Router(nn.Module):
    def __init__(self, num_experts, size):
        super(Router, self).__init__()
        self.gate = nn.Linear(3 * size * size, num_experts)

    def forward(self, x):
        # Top-1 strategy
        batch_size = x.size(0)
        x_flat = x.view(batch_size, -1)
        gate_logits = self.gate(x_flat)
        top1_expert = torch.argmax(gate_logits, dim=1)
        return top1_expert

    def get_second_expert(self, x):
        batch_size = x.size(0)
        x_flat = x.view(batch_size, -1)
        gate_logits = self.gate(x_flat)
        _, top2_indices = torch.topk(gate_logits, k=2, dim=1)
        second_expert = top2_indices[:, 1]
        return second_expert


class ResnetExpert(nn.Module):
    def __init__(self, num_classes=10):
        super(ResnetExpert, self).__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                                 nn.Flatten(), nn.Linear(16, num_classes))

    def forward(self, x):
        return self.net(x)


class MOE_Resnet18(nn.Module):
    def __init__(self, num_experts, num_classes, size):
        super(MOE_Resnet18, self).__init__()
        self.experts = nn.ModuleList([ResnetExpert(num_classes) for _ in range(num_experts)])
        self.router = Router(num_experts, size)

    def forward(self, x):
        batch_size = x.size(0)
        # Top-1 Strategy
        top1_expert_indices = self.router(x)
        # Forward the input through the selected expert
        outputs = torch.zeros(batch_size, 10).to(x.device)  # 10: dataset class
        for i in range(batch_size):
            expert_output = self.experts[top1_expert_indices[i]](x[i].unsqueeze(0))
            outputs[i] = expert_output
        return outputs


class PGD:
    def __init__(self, eps, sigma, nb_iter, DEVICE):
        self.eps, self.sigma, self.nb_iter, self.device = eps, sigma, nb_iter, DEVICE

    def attack(self, net, inp, label):
        x_adv = inp.detach() + 0.001 * torch.randn_like(inp)
        for _ in range(self.nb_iter):
            x_adv.requires_grad_(True)
            loss = F.cross_entropy(net(x_adv), label)
            grad, = torch.autograd.grad(loss, [x_adv])
            x_adv = x_adv.detach() + self.sigma * torch.sign(grad.detach())
            x_adv = torch.min(torch.max(x_adv, inp - self.eps), inp + self.eps)
        return x_adv.detach()


torch.manual_seed(0)
args = {"lr": 1e-3, "bs": 6, "size": 8, "n_epochs": 2, "beta": 6}
device = 'cpu'
BATCH_SIZE = args["bs"]
loaders = {'train': [(torch.randn(BATCH_SIZE, 3, args["size"], args["size"]), torch.randint(0, 10, (BATCH_SIZE,)))
                     for _ in range(2)]}

print('==> Building model..')
net = MOE_Resnet18(num_experts=4, num_classes=10, size=args["size"])
criterion = nn.CrossEntropyLoss()
criterion_kl = nn.KLDivLoss(reduction='sum')
optimizer = optim.Adam(net.parameters(), lr=args["lr"])
beta = args["beta"]
pgd_train = PGD(eps=8 / 255, sigma=2 / 255, nb_iter=1, DEVICE=device)

gate_before = net.router.gate.weight.detach().clone()
experts_before = [p.detach().clone() for p in net.experts.parameters()]
router_grads_seen = []


def train(epoch):
    print('\nEpoch: %d' % epoch)
    net.train()
    train_loss = 0
    for batch_idx, (inputs, targets) in enumerate(loaders['train']):
        inputs, targets = inputs.to(device), targets.to(device)
        outputs = net(inputs)
        inputs_adv = pgd_train.attack(net=net, inp=inputs, label=targets)
        outputs_adv = net(inputs_adv)
        loss_model = criterion(outputs_adv, targets)

        second_best_expert_indices = net.router.get_second_expert(inputs)
        loss_expert = 0.0
        for expert_id, expert in enumerate(net.experts):
            selected_mask = (second_best_expert_indices == expert_id)
            if selected_mask.sum() == 0:
                continue
            selected_inputs = inputs[selected_mask]
            selected_targets = targets[selected_mask]
            expert_inputs_adv = pgd_train.attack(net=expert, inp=selected_inputs, label=selected_targets)
            expert_outputs = expert(selected_inputs)
            expert_outputs_adv = expert(expert_inputs_adv)
            loss_expert += criterion_kl(F.log_softmax(expert_outputs_adv, dim=1), F.softmax(expert_outputs, dim=1))
        loss = loss_model + beta * (1.0 / BATCH_SIZE) * loss_expert
        loss.backward()
        router_grads_seen.append(net.router.gate.weight.grad)
        optimizer.step()
        optimizer.zero_grad()
        train_loss += loss.item()
    return train_loss / (batch_idx + 1)


for epoch in range(0, args["n_epochs"]):
    trainloss = train(epoch)
    print('train loss %.4f' % trainloss)


if __name__ == "__main__":
    with torch.no_grad():
        assert all(g is None for g in router_grads_seen), router_grads_seen
        assert torch.equal(net.router.gate.weight, gate_before)
        assert any(not torch.equal(a, p) for a, p in zip(experts_before, net.experts.parameters()))
    print("evidence holds: router.gate gets no gradient through argmax/topk and never changes; only the experts train")
