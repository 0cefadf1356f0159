# source: https://github.com/bboylyg/NAD/issues/8
# category: DL202
# expect: flag 58, 59, 60, 61
# evidence: the three attention-transfer terms carry no grad_fn; the student trains identically with beta 5000 and beta 0
import copy
from types import SimpleNamespace

import torch
from torch import nn
import torch.nn.functional as F


class AT(nn.Module):
    """Attention transfer: match normalised spatial attention maps of student and teacher."""

    def __init__(self, p):
        super(AT, self).__init__()
        self.p = p

    def forward(self, fm_s, fm_t):
        return F.mse_loss(self.attention_map(fm_s), self.attention_map(fm_t))

    def attention_map(self, fm, eps=1e-6):
        am = torch.pow(torch.abs(fm), self.p)
        am = torch.sum(am, dim=1, keepdim=True)
        norm = torch.norm(am, dim=(2, 3), keepdim=True)
        return torch.div(am, norm + eps)


class SmallWRN(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.block1 = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU())
        self.block2 = nn.Sequential(nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.ReLU())
        self.block3 = nn.Sequential(nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU())
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        activation1 = self.block1(x)
        activation2 = self.block2(activation1)
        activation3 = self.block3(activation2)
        out = self.fc(F.adaptive_avg_pool2d(activation3, 1).flatten(1))
        return activation1, activation2, activation3, out


def train_step(opt, train_loader, nets, optimizer, criterions, epoch):
    snet = nets['snet']
    tnet = nets['tnet']
    criterionCls = criterions['criterionCls']
    criterionAT = criterions['criterionAT']
    snet.train()
    at_loss = None
    for idx, (img, target) in enumerate(train_loader, start=1):
        activation1_s, activation2_s, activation3_s, output_s = snet(img)
        activation1_t, activation2_t, activation3_t, _ = tnet(img)

        cls_loss = criterionCls(output_s, target)
        at3_loss = criterionAT(activation3_s, activation3_t).detach() * opt.beta3
        at2_loss = criterionAT(activation2_s, activation2_t).detach() * opt.beta2
        at1_loss = criterionAT(activation1_s, activation1_t).detach() * opt.beta1
        at_loss = at1_loss + at2_loss + at3_loss + cls_loss

        optimizer.zero_grad()
        at_loss.backward()
        optimizer.step()
    return at1_loss, at2_loss, at3_loss


def test(opt, test_loader, nets, criterions):
    snet, tnet = nets['snet'], nets['tnet']
    criterionAT = criterions['criterionAT']
    snet.eval()
    correct, at_total = 0, 0.0
    for img, target in test_loader:
        with torch.no_grad():
            activation1_s, activation2_s, activation3_s, output_s = snet(img)
            activation1_t, activation2_t, activation3_t, _ = tnet(img)
            at3_loss = criterionAT(activation3_s, activation3_t).detach() * opt.beta3
            at_total += at3_loss.item()
        correct += (output_s.argmax(1) == target).sum().item()
    return correct, at_total


def run(opt, student, teacher, loader):
    for param in teacher.parameters():
        param.requires_grad = False
    teacher.eval()
    nets = {'snet': student, 'tnet': teacher}
    optimizer = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    criterions = {'criterionCls': nn.CrossEntropyLoss(), 'criterionAT': AT(opt.p)}
    terms = train_step(opt, loader, nets, optimizer, criterions, epoch=1)
    test(opt, loader, nets, criterions)
    return terms


if __name__ == "__main__":
    torch.manual_seed(0)
    student0, teacher = SmallWRN(), SmallWRN()
    loader = [(torch.randn(4, 3, 8, 8), torch.randint(0, 4, (4,))) for _ in range(3)]

    students, terms = {}, {}
    for beta in (5000.0, 0.0):
        opt = SimpleNamespace(p=2.0, beta1=beta, beta2=beta, beta3=beta)
        students[beta] = copy.deepcopy(student0)
        terms[beta] = run(opt, students[beta], teacher, loader)

    assert all(t.grad_fn is None for t in terms[5000.0])
    assert all(t.item() > 0 for t in terms[5000.0])  # the terms have values, just no gradient
    for p_at, p_plain in zip(students[5000.0].parameters(), students[0.0].parameters()):
        assert torch.equal(p_at, p_plain)
    print("evidence holds: the attention-transfer losses are detached before backward; beta 5000 changes no weight")
