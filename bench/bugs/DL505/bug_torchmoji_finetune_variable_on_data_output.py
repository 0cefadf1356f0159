# source: https://github.com/huggingface/torchMoji/issues/21
# category: DL505
# expect: flag 35, 47
# evidence: forward() returns outputs.data for tensor input, so the loss has no graph; wrapping it in Variable(loss, requires_grad=True) silences the error but fine-tuning leaves every weight exactly as it was
import torch
import torch.nn as nn
from torch.autograd import Variable


class TorchMoji(nn.Module):
    def __init__(self, nb_classes, nb_tokens, embed_dim=16, hidden=8, final_dropout_rate=0.0):
        super(TorchMoji, self).__init__()
        self.embed = nn.Embedding(nb_tokens, embed_dim)
        self.lstm_0 = nn.LSTM(embed_dim, hidden, batch_first=True, bidirectional=True)
        self.attention_layer = nn.Linear(2 * hidden, 1)
        self.final_dropout = nn.Dropout(final_dropout_rate)
        self.output_layer = nn.Sequential(nn.Linear(2 * hidden, nb_classes), nn.Softmax(dim=1))

    def forward(self, input_seqs):
        return_tensor = False
        if isinstance(input_seqs, torch.Tensor):
            return_tensor = True
        else:
            input_seqs = torch.as_tensor(input_seqs, dtype=torch.long)

        x = self.embed(input_seqs)
        lstm_out, _ = self.lstm_0(x)
        weights = torch.softmax(self.attention_layer(lstm_out).squeeze(-1), dim=1)
        x = (lstm_out * weights.unsqueeze(-1)).sum(1)
        x = self.final_dropout(x)
        outputs = self.output_layer(x)

        # Adapt return format if needed
        if return_tensor:
            outputs = outputs.data
        return outputs


def fit_model(model, loss_op, optim_op, train_gen, epochs):
    for epoch in range(epochs):
        model.train()
        for i, data in enumerate(train_gen):
            X_train, y_train = data
            model.zero_grad()
            output = model(X_train)
            loss = loss_op(output, y_train)
            loss = Variable(loss, requires_grad=True)
            loss.backward()
            optim_op.step()
    return loss


def finetune(model, train_gen, nb_classes, epochs=2):
    loss_op = nn.BCELoss() if nb_classes <= 2 else nn.CrossEntropyLoss()
    adam = torch.optim.Adam(model.parameters(), lr=0.01)
    return fit_model(model, loss_op, adam, train_gen, epochs)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = TorchMoji(nb_classes=3, nb_tokens=30)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    train_gen = [(torch.randint(0, 30, (4, 6)), torch.randint(0, 3, (4,))) for _ in range(3)]
    last_loss = finetune(model, train_gen, nb_classes=3)
    assert last_loss.requires_grad and last_loss.grad_fn is None
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    print("evidence holds: the loss is rebuilt from outputs.data; backward reaches no weight and fine-tuning changes nothing")
