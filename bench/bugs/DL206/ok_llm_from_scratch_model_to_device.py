# source: https://github.com/rasbt/LLMs-from-scratch/issues/648
# category: DL206
# expect: clean
# evidence: the bare model.to(device) is in place for an nn.Module (same parameter objects before and after), the batches are reassigned with x = x.to(device), and training changes the weights.
import torch
import torch.nn as nn


class GPTModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.drop_emb = nn.Dropout(cfg["drop_rate"])
        self.trf_blocks = nn.Sequential(*[nn.Sequential(nn.LayerNorm(cfg["emb_dim"]), nn.Linear(cfg["emb_dim"], cfg["emb_dim"]), nn.GELU())
                                          for _ in range(cfg["n_layers"])])
        self.final_norm = nn.LayerNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)

    def forward(self, in_idx):
        batch_size, seq_len = in_idx.shape
        tok_embeds = self.tok_emb(in_idx)
        pos_embeds = self.pos_emb(torch.arange(seq_len, device=in_idx.device))
        x = self.drop_emb(tok_embeds + pos_embeds)
        x = self.trf_blocks(x)
        x = self.final_norm(x)
        return self.out_head(x)


def calc_loss_batch(input_batch, target_batch, model, device):
    input_batch, target_batch = input_batch.to(device), target_batch.to(device)
    logits = model(input_batch)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), target_batch.flatten())
    return loss


def calc_loss_loader(data_loader, model, device, num_batches=None):
    total_loss = 0.
    if len(data_loader) == 0:
        return float("nan")
    num_batches = len(data_loader) if num_batches is None else min(num_batches, len(data_loader))
    for i, (input_batch, target_batch) in enumerate(data_loader):
        if i < num_batches:
            loss = calc_loss_batch(input_batch, target_batch, model, device)
            total_loss += loss.item()
        else:
            break
    return total_loss / num_batches


def evaluate_model(model, train_loader, val_loader, device, eval_iter):
    model.eval()
    with torch.no_grad():
        train_loss = calc_loss_loader(train_loader, model, device, num_batches=eval_iter)
        val_loss = calc_loss_loader(val_loader, model, device, num_batches=eval_iter)
    model.train()
    return train_loss, val_loss


def train_model_simple(model, train_loader, val_loader, optimizer, device, num_epochs, eval_freq, eval_iter):
    train_losses, val_losses, track_tokens_seen = [], [], []
    tokens_seen, global_step = 0, -1
    for epoch in range(num_epochs):
        model.train()
        for input_batch, target_batch in train_loader:
            optimizer.zero_grad()
            loss = calc_loss_batch(input_batch, target_batch, model, device)
            loss.backward()
            optimizer.step()
            tokens_seen += input_batch.numel()
            global_step += 1
            if global_step % eval_freq == 0:
                train_loss, val_loss = evaluate_model(model, train_loader, val_loader, device, eval_iter)
                train_losses.append(train_loss)
                val_losses.append(val_loss)
                track_tokens_seen.append(tokens_seen)
                print(f"Ep {epoch+1} (Step {global_step:06d}): Train loss {train_loss:.3f}, Val loss {val_loss:.3f}")
    return train_losses, val_losses, track_tokens_seen


if __name__ == "__main__":
    torch.manual_seed(123)
    GPT_CONFIG = {"vocab_size": 50, "context_length": 8, "emb_dim": 16, "n_layers": 2, "drop_rate": 0.1}
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = GPTModel(GPT_CONFIG)
    params_before_to = [id(p) for p in model.parameters()]
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.0004, weight_decay=0.1)

    data = torch.randint(0, 50, (12, 9))
    train_loader = [(data[i:i + 3, :-1], data[i:i + 3, 1:]) for i in range(0, 9, 3)]
    val_loader = [(data[9:12, :-1], data[9:12, 1:])]
    head_before = model.out_head.weight.detach().clone()
    train_losses, val_losses, _ = train_model_simple(model, train_loader, val_loader, optimizer, device,
                                                     num_epochs=2, eval_freq=2, eval_iter=1)
    with torch.no_grad():
        assert [id(p) for p in model.parameters()] == params_before_to
        assert all(p.device.type == device.type for p in model.parameters())
        assert not torch.equal(head_before, model.out_head.weight)
    print("evidence holds: model.to(device) moved the module in place and training updated the weights")
