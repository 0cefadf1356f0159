# source: https://github.com/huggingface/transformers/pull/4479
# category: DL502
# expect: flag 76
# evidence: compute_heads_importance() made the mask a requires_grad leaf, so the next round's in-place masking raises "a view of a leaf Variable that requires grad is being used in an in-place operation."
import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyBert(nn.Module):
    """Multi-head self-attention classifier that accepts a (layers, heads) head mask."""

    def __init__(self, n_layers=2, n_heads=4, dim=16, n_labels=3):
        super().__init__()
        self.n_layers, self.n_heads, self.dim = n_layers, n_heads, dim
        self.qkv = nn.ModuleList([nn.Linear(dim, 3 * dim) for _ in range(n_layers)])
        self.out = nn.ModuleList([nn.Linear(dim, dim) for _ in range(n_layers)])
        self.classifier = nn.Linear(dim, n_labels)

    def forward(self, x, labels, head_mask):
        b, t, _ = x.shape
        hd = self.dim // self.n_heads
        for layer in range(self.n_layers):
            q, k, v = self.qkv[layer](x).chunk(3, dim=-1)
            q, k, v = (z.view(b, t, self.n_heads, hd).transpose(1, 2) for z in (q, k, v))
            attn = torch.softmax(q @ k.transpose(-1, -2) / hd ** 0.5, dim=-1)
            attn = attn * head_mask[layer].view(1, -1, 1, 1)
            ctx = (attn @ v).transpose(1, 2).reshape(b, t, self.dim)
            x = x + self.out[layer](ctx)
        logits = self.classifier(x.mean(1))
        return F.cross_entropy(logits, labels), logits


def compute_heads_importance(args, model, eval_dataloader, head_mask=None):
    n_layers, n_heads = model.n_layers, model.n_heads
    head_importance = torch.zeros(n_layers, n_heads)
    if head_mask is None:
        head_mask = torch.ones(n_layers, n_heads)
    head_mask.requires_grad_(requires_grad=True)

    preds, labels = None, None
    tot_tokens = 0.0
    for input_ids, label_ids in eval_dataloader:
        loss, logits = model(input_ids, label_ids, head_mask=head_mask)
        loss.backward()
        head_importance += head_mask.grad.abs().detach()
        preds = logits.detach() if preds is None else torch.cat([preds, logits.detach()])
        labels = label_ids if labels is None else torch.cat([labels, label_ids])
        tot_tokens += input_ids.shape[0]

    head_importance /= tot_tokens
    if args["normalize_importance"]:
        head_importance = (head_importance - head_importance.min()) / (head_importance.max() - head_importance.min())
    return head_importance, preds, labels


def accuracy(preds, labels):
    return (preds.argmax(-1) == labels).float().mean().item()


def mask_heads(args, model, eval_dataloader):
    head_importance, preds, labels = compute_heads_importance(args, model, eval_dataloader)
    original_score = accuracy(preds, labels)
    current_score = original_score
    new_head_mask = torch.ones_like(head_importance)
    num_to_mask = max(1, int(new_head_mask.numel() * args["masking_amount"]))
    rounds = 0
    while current_score >= original_score * args["masking_threshold"] and rounds < args["max_rounds"]:
        head_mask = new_head_mask.clone()
        head_importance[head_mask == 0.0] = float("Inf")
        current_heads_to_mask = head_importance.view(-1).sort()[1]
        if len(current_heads_to_mask) <= num_to_mask:
            break
        current_heads_to_mask = current_heads_to_mask[:num_to_mask]
        new_head_mask = new_head_mask.view(-1)
        new_head_mask[current_heads_to_mask] = 0.0
        new_head_mask = new_head_mask.view_as(head_mask)
        head_importance, preds, labels = compute_heads_importance(args, model, eval_dataloader, head_mask=new_head_mask)
        current_score = accuracy(preds, labels)
        rounds += 1
    return head_mask


if __name__ == "__main__":
    torch.manual_seed(0)
    model = TinyBert()
    eval_dataloader = [(torch.randn(4, 5, 16), torch.randint(0, 3, (4,))) for _ in range(2)]
    args = {"normalize_importance": True, "masking_amount": 0.25, "masking_threshold": 0.0, "max_rounds": 2}
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imp, _, _ = compute_heads_importance(args, model, eval_dataloader)  # first pass: mask is a leaf
        assert torch.isfinite(imp).all()
        try:
            mask_heads(args, model, eval_dataloader)
            raised = None
        except RuntimeError as e:
            raised = str(e)
    assert raised == "a view of a leaf Variable that requires grad is being used in an in-place operation.", raised
    print("evidence holds: masking more heads in place on the mask that now requires grad raises the leaf in-place error")
