# source: https://github.com/sicara/easy-few-shot-learning/commit/570839f92e720ef30b7794c6ca7d7d4da6a86488
# category: DL302
# expect: flag 58, 77
# evidence: called directly, Finetune adapts its prototypes; called from evaluate(), whose loop runs under torch.no_grad(), its inner loss.backward() raises "element 0 of tensors does not require grad"
import torch
from torch import Tensor, nn


class FewShotClassifier(nn.Module):
    """Abstract few-shot classifier: stores a support set, then classifies queries."""

    def __init__(self, backbone: nn.Module, use_softmax: bool = False):
        super().__init__()
        self.backbone = backbone
        self.use_softmax = use_softmax
        self.prototypes = None
        self.support_features = None
        self.support_labels = None

    def store_features_labels_and_prototypes(self, support_images: Tensor, support_labels: Tensor):
        self.support_labels = support_labels
        self.support_features = self.backbone(support_images)
        n_way = len(torch.unique(support_labels))
        self.prototypes = torch.cat(
            [self.support_features[torch.nonzero(support_labels == label)].mean(0) for label in range(n_way)]
        )

    def get_logits_from_cosine_distances_to_prototypes(self, samples: Tensor) -> Tensor:
        return nn.functional.normalize(samples, dim=1) @ nn.functional.normalize(self.prototypes, dim=1).T

    def softmax_if_specified(self, output: Tensor) -> Tensor:
        return output.softmax(-1) if self.use_softmax else output


class Finetune(FewShotClassifier):
    """Fine-tune prototypes on the support set's classification error, then classify by cosine distance."""

    def __init__(self, *args, fine_tuning_steps: int = 10, fine_tuning_lr: float = 1e-3, **kwargs):
        super().__init__(*args, **kwargs)
        # the prototypes are fine-tuned as leaf tensors, so the backbone is frozen
        self.backbone.requires_grad_(False)
        self.fine_tuning_steps = fine_tuning_steps
        self.fine_tuning_lr = fine_tuning_lr

    def process_support_set(self, support_images: Tensor, support_labels: Tensor):
        self.store_features_labels_and_prototypes(support_images, support_labels)

    def forward(self, query_images: Tensor) -> Tensor:
        query_features = self.backbone.forward(query_images)

        # Run adaptation
        self.prototypes.requires_grad_()
        optimizer = torch.optim.Adam([self.prototypes], lr=self.fine_tuning_lr)
        for _ in range(self.fine_tuning_steps):
            support_logits = self.get_logits_from_cosine_distances_to_prototypes(self.support_features)
            loss = nn.functional.cross_entropy(support_logits, self.support_labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        return self.softmax_if_specified(
            self.get_logits_from_cosine_distances_to_prototypes(query_features)
        ).detach()


def evaluate_on_one_task(model, support_images, support_labels, query_images, query_labels):
    model.process_support_set(support_images, support_labels)
    predictions = model(query_images).argmax(dim=1)
    return (predictions == query_labels).sum().item(), len(query_labels)


def evaluate(model, data_loader, device="cpu"):
    total_predictions = 0
    correct_predictions = 0
    # eval mode affects some layers; no_grad() avoids keeping the computational graph
    model.eval()
    with torch.no_grad():
        for support_images, support_labels, query_images, query_labels, _ in data_loader:
            correct, total = evaluate_on_one_task(
                model,
                support_images.to(device),
                support_labels.to(device),
                query_images.to(device),
                query_labels.to(device),
            )
            total_predictions += total
            correct_predictions += correct
    return correct_predictions / total_predictions


def make_task(n_way=3, n_shot=2, n_query=2, dim=6):
    support_labels = torch.arange(n_way).repeat_interleave(n_shot)
    query_labels = torch.arange(n_way).repeat_interleave(n_query)
    centers = torch.randn(n_way, dim) * 3
    support_images = centers[support_labels] + torch.randn(len(support_labels), dim)
    query_images = centers[query_labels] + torch.randn(len(query_labels), dim)
    return support_images, support_labels, query_images, query_labels, list(range(n_way))


if __name__ == "__main__":
    torch.manual_seed(0)
    backbone = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8))
    model = Finetune(backbone, fine_tuning_steps=3, fine_tuning_lr=0.1)
    task = make_task()

    # direct call, grad mode on: the prototypes are fine-tuned
    model.process_support_set(task[0], task[1])
    start = model.prototypes.detach().clone()
    model(task[2])
    assert not torch.equal(start, model.prototypes.detach())

    # through evaluate(): the same backward now runs inside torch.no_grad()
    try:
        evaluate(model, [task])
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised is not None and "element 0 of tensors does not require grad" in raised, raised
    print("evidence holds: Finetune adapts when called directly and raises when evaluate() calls it under no_grad")
