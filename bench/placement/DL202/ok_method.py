# source: placement matrix
# category: DL202
# expect: clean
# evidence: Distiller.step matches the teacher with the live student logits (the teacher side is under no_grad), so the term trains the student: its weights differ from cross-entropy-only training.
import copy
import torch
import torch.nn.functional as F


class Distiller:
    def __init__(self, student, teacher, w):
        self.student = student
        self.teacher = teacher.requires_grad_(False)
        self.updater = torch.optim.SGD(student.parameters(), lr=0.5)
        self.w = w

    def step(self, xb, yb):
        self.updater.zero_grad()
        with torch.no_grad():
            t_prob = F.softmax(self.teacher(xb), dim=-1)
        s_logit = self.student(xb)
        distill = F.kl_div(F.log_softmax(s_logit, dim=-1), t_prob, reduction="batchmean")
        (F.cross_entropy(s_logit, yb) + self.w * distill).backward()
        self.updater.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    student = torch.nn.Linear(5, 3)
    dist = Distiller(student, torch.nn.Linear(5, 3), w=1.0)
    stream = [(torch.randn(8, 5), torch.randint(0, 3, (8,))) for _ in range(3)]
    shadow = copy.deepcopy(student)
    for xb, yb in stream:
        dist.step(xb, yb)
    sgd = torch.optim.SGD(shadow.parameters(), lr=0.5)
    for xb, yb in stream:
        sgd.zero_grad()
        F.cross_entropy(shadow(xb), yb).backward()
        sgd.step()
    assert not torch.allclose(student.weight, shadow.weight), "the distillation term had no effect"
    print("evidence holds: the distillation term trains the student (weights differ from CE-only training)")
