# source: https://github.com/facebookresearch/dino/blob/main/main_dino.py
# category: DL603
# expect: clean
# evidence: the teacher runs outside no_grad, but its parameters are frozen (requires_grad=False) and DINOLoss detaches its softmax, so only the student gets gradients; the teacher moves by EMA only
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class DINOHead(nn.Module):
    def __init__(self, in_dim, out_dim, hidden_dim=16, bottleneck_dim=8):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, bottleneck_dim))
        self.last_layer = nn.Linear(bottleneck_dim, out_dim, bias=False)

    def forward(self, x):
        x = F.normalize(self.mlp(x), dim=-1, p=2)
        return self.last_layer(x)


class MultiCropWrapper(nn.Module):
    def __init__(self, backbone, head):
        super().__init__()
        self.backbone = backbone
        self.head = head

    def forward(self, x):
        if not isinstance(x, list):
            x = [x]
        return self.head(torch.cat([self.backbone(crop) for crop in x]))


class DINOLoss(nn.Module):
    def __init__(self, out_dim, ncrops, warmup_teacher_temp, teacher_temp, warmup_teacher_temp_epochs,
                 nepochs, student_temp=0.1, center_momentum=0.9):
        super().__init__()
        self.student_temp = student_temp
        self.center_momentum = center_momentum
        self.ncrops = ncrops
        self.register_buffer("center", torch.zeros(1, out_dim))
        self.teacher_temp_schedule = np.concatenate((
            np.linspace(warmup_teacher_temp, teacher_temp, warmup_teacher_temp_epochs),
            np.ones(nepochs - warmup_teacher_temp_epochs) * teacher_temp))

    def forward(self, student_output, teacher_output, epoch):
        student_out = student_output / self.student_temp
        student_out = student_out.chunk(self.ncrops)

        # teacher centering and sharpening
        temp = self.teacher_temp_schedule[epoch]
        teacher_out = F.softmax((teacher_output - self.center) / temp, dim=-1)
        teacher_out = teacher_out.detach().chunk(2)

        total_loss = 0
        n_loss_terms = 0
        for iq, q in enumerate(teacher_out):
            for v in range(len(student_out)):
                if v == iq:
                    continue
                loss = torch.sum(-q * F.log_softmax(student_out[v], dim=-1), dim=-1)
                total_loss += loss.mean()
                n_loss_terms += 1
        total_loss /= n_loss_terms
        self.update_center(teacher_output)
        return total_loss

    @torch.no_grad()
    def update_center(self, teacher_output):
        batch_center = torch.sum(teacher_output, dim=0, keepdim=True) / len(teacher_output)
        self.center = self.center * self.center_momentum + batch_center * (1 - self.center_momentum)


def train_one_epoch(student, teacher, dino_loss, data_loader, optimizer, momentum_schedule, epoch):
    for it, images in enumerate(data_loader):
        it = len(data_loader) * epoch + it
        # only the 2 global views pass through the teacher
        teacher_output = teacher(images[:2])
        student_output = student(images)
        loss = dino_loss(student_output, teacher_output, epoch)

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        # EMA update for the teacher
        with torch.no_grad():
            m = momentum_schedule[it]
            for param_q, param_k in zip(student.parameters(), teacher.parameters()):
                param_k.data.mul_(m).add_((1 - m) * param_q.detach().data)


def train_dino(data_loader, epochs=2, out_dim=10):
    student = MultiCropWrapper(nn.Sequential(nn.Flatten(), nn.Linear(12, 8)), DINOHead(8, out_dim))
    teacher = MultiCropWrapper(nn.Sequential(nn.Flatten(), nn.Linear(12, 8)), DINOHead(8, out_dim))
    teacher.load_state_dict(student.state_dict())
    # there is no backpropagation through the teacher, so no need for gradients
    for p in teacher.parameters():
        p.requires_grad = False
    dino_loss = DINOLoss(out_dim, ncrops=4, warmup_teacher_temp=0.04, teacher_temp=0.04,
                         warmup_teacher_temp_epochs=1, nepochs=epochs)
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-3)
    momentum_schedule = np.linspace(0.9, 1.0, epochs * len(data_loader))
    for epoch in range(epochs):
        train_one_epoch(student, teacher, dino_loss, data_loader, optimizer, momentum_schedule, epoch)
    return student, teacher


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    data_loader = [[torch.randn(4, 12) for _ in range(4)] for _ in range(3)]
    student, teacher = train_dino(data_loader)

    assert all(p.grad is None for p in teacher.parameters())
    assert all(p.grad is not None for p in student.parameters())
    # the teacher started as an exact copy; it now lags behind the student (EMA)
    diffs = [(ps - pt).abs().max().item() for ps, pt in zip(student.parameters(), teacher.parameters())]
    assert max(diffs) > 0
    print("evidence holds: the teacher output is a target: no gradient reaches the teacher, the student trains")
