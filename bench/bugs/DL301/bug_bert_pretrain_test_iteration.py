# source: https://github.com/codertimo/BERT-pytorch/issues/92
# category: DL301
# expect: flag 100, 108, 110
# evidence: BERTTrainer.test() runs iteration(train=False) with autograd on, so every test batch's next_sent_output and mask_lm_output carry grad_fn although no backward is ever called on them.
import torch
import torch.nn as nn
from torch.optim import Adam


class BERT(nn.Module):
    def __init__(self, vocab_size, hidden=16, n_layers=2, attn_heads=2, dropout=0.1):
        super().__init__()
        self.hidden = hidden
        self.token = nn.Embedding(vocab_size, hidden, padding_idx=0)
        self.segment = nn.Embedding(3, hidden, padding_idx=0)
        layer = nn.TransformerEncoderLayer(hidden, attn_heads, hidden * 4, dropout, batch_first=True)
        self.transformer_blocks = nn.TransformerEncoder(layer, n_layers)

    def forward(self, x, segment_info):
        mask = (x == 0)
        x = self.token(x) + self.segment(segment_info)
        return self.transformer_blocks(x, src_key_padding_mask=mask)


class NextSentencePrediction(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.linear = nn.Linear(hidden, 2)
        self.softmax = nn.LogSoftmax(dim=-1)

    def forward(self, x):
        return self.softmax(self.linear(x[:, 0]))


class MaskedLanguageModel(nn.Module):
    def __init__(self, hidden, vocab_size):
        super().__init__()
        self.linear = nn.Linear(hidden, vocab_size)
        self.softmax = nn.LogSoftmax(dim=-1)

    def forward(self, x):
        return self.softmax(self.linear(x))


class BERTLM(nn.Module):
    def __init__(self, bert: BERT, vocab_size):
        super().__init__()
        self.bert = bert
        self.next_sentence = NextSentencePrediction(self.bert.hidden)
        self.mask_lm = MaskedLanguageModel(self.bert.hidden, vocab_size)

    def forward(self, x, segment_label):
        x = self.bert(x, segment_label)
        return self.next_sentence(x), self.mask_lm(x)


class ScheduledOptim():
    def __init__(self, optimizer, d_model, n_warmup_steps):
        self._optimizer = optimizer
        self.n_warmup_steps = n_warmup_steps
        self.n_current_steps = 0
        self.init_lr = d_model ** -0.5

    def step_and_update_lr(self):
        self._update_learning_rate()
        self._optimizer.step()

    def zero_grad(self):
        self._optimizer.zero_grad()

    def _get_lr_scale(self):
        return min(self.n_current_steps ** -0.5, self.n_current_steps * self.n_warmup_steps ** -1.5)

    def _update_learning_rate(self):
        self.n_current_steps += 1
        lr = self.init_lr * self._get_lr_scale()
        for param_group in self._optimizer.param_groups:
            param_group['lr'] = lr


class BERTTrainer:
    def __init__(self, bert: BERT, vocab_size: int, train_dataloader, test_dataloader=None,
                 lr: float = 1e-4, betas=(0.9, 0.999), weight_decay: float = 0.01, warmup_steps=10000,
                 with_cuda: bool = True, cuda_devices=None, log_freq: int = 10):
        self.device = torch.device("cpu")
        self.bert = bert
        self.model = BERTLM(bert, vocab_size).to(self.device)
        self.train_data = train_dataloader
        self.test_data = test_dataloader
        self.optim = Adam(self.model.parameters(), lr=lr, betas=betas, weight_decay=weight_decay)
        self.optim_schedule = ScheduledOptim(self.optim, self.bert.hidden, n_warmup_steps=warmup_steps)
        self.criterion = nn.NLLLoss(ignore_index=0)
        self.log_freq = log_freq
        print("Total Parameters:", sum([p.nelement() for p in self.model.parameters()]))

    def train(self, epoch):
        self.iteration(epoch, self.train_data)

    def test(self, epoch):
        self.iteration(epoch, self.test_data, train=False)

    def iteration(self, epoch, data_loader, train=True):
        str_code = "train" if train else "test"
        data_iter = enumerate(data_loader)
        avg_loss = 0.0
        total_correct = 0
        total_element = 0
        for i, data in data_iter:
            data = {key: value.to(self.device) for key, value in data.items()}
            next_sent_output, mask_lm_output = self.model.forward(data["bert_input"], data["segment_label"])
            next_loss = self.criterion(next_sent_output, data["is_next"])
            mask_loss = self.criterion(mask_lm_output.transpose(1, 2), data["bert_label"])
            loss = next_loss + mask_loss
            if train:
                self.optim_schedule.zero_grad()
                loss.backward()
                self.optim_schedule.step_and_update_lr()
            correct = next_sent_output.argmax(dim=-1).eq(data["is_next"]).sum().item()
            avg_loss += loss.item()
            total_correct += correct
            total_element += data["is_next"].nelement()
            post_fix = {"epoch": epoch, "iter": i, "avg_loss": avg_loss / (i + 1),
                        "avg_acc": total_correct / total_element * 100, "loss": loss.item()}
            if i % self.log_freq == 0:
                print(str(post_fix))
        print("EP%d_%s, avg_loss=" % (epoch, str_code), avg_loss / len(data_loader),
              "total_acc=", total_correct * 100.0 / total_element)


def BERTDataset(vocab_size, n_batches, batch_size=4, seq_len=12):
    batches = []
    for _ in range(n_batches):
        bert_input = torch.randint(5, vocab_size, (batch_size, seq_len))
        bert_label = torch.where(torch.rand(batch_size, seq_len) < 0.15, bert_input, torch.zeros_like(bert_input))
        segment_label = torch.cat([torch.ones(batch_size, seq_len // 2), 2 * torch.ones(batch_size, seq_len // 2)], 1).long()
        batches.append({"bert_input": bert_input, "bert_label": bert_label, "segment_label": segment_label,
                        "is_next": torch.randint(0, 2, (batch_size,))})
    return batches


if __name__ == "__main__":
    torch.manual_seed(0)
    vocab_size = 30
    train_data_loader = BERTDataset(vocab_size, 3)
    test_data_loader = BERTDataset(vocab_size, 3)
    bert = BERT(vocab_size, hidden=16, n_layers=2, attn_heads=2)
    trainer = BERTTrainer(bert, vocab_size, train_dataloader=train_data_loader, test_dataloader=test_data_loader,
                          lr=1e-3, warmup_steps=10, log_freq=10)
    test_outputs = []
    for epoch in range(1):
        trainer.train(epoch)
        hooks = [trainer.model.next_sentence.register_forward_hook(lambda m, i, o: test_outputs.append(o)),
                 trainer.model.mask_lm.register_forward_hook(lambda m, i, o: test_outputs.append(o))]
        if test_data_loader is not None:
            trainer.test(epoch)
        for h in hooks:
            h.remove()
    assert len(test_outputs) == 6
    assert all(out.grad_fn is not None for out in test_outputs)
    assert all(p.grad is not None for p in trainer.model.parameters() if p.requires_grad)  # only from train()
    print("evidence holds: all 3 test batches produced next_sent/mask_lm outputs with grad_fn (graph kept, never backpropagated)")
