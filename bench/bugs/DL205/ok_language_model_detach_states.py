# source: https://github.com/yunjey/pytorch-tutorial/issues/90
# category: DL205
# expect: clean
# evidence: the script cuts truncated BPTT with states = detach(states) (out-of-place detach, result kept) before every chunk; every chunk's backward succeeds, the hidden states fed to the LSTM carry no graph, and all weights train.
# Some part of the code was referenced from below.
# https://github.com/pytorch/examples/tree/master/word_language_model
# (tutorials/02-intermediate/language_model/main.py, with a random token corpus and tiny sizes)
import torch
import torch.nn as nn
from torch.nn.utils import clip_grad_norm_

torch.manual_seed(0)
device = torch.device('cpu')

# Hyper-parameters
embed_size = 16
hidden_size = 32
num_layers = 1
num_epochs = 2
batch_size = 4
seq_length = 5
learning_rate = 0.002

# "Corpus": token ids already batchified to (batch_size, -1)
vocab_size = 20
ids = torch.randint(0, vocab_size, (batch_size, 26))
num_batches = ids.size(1) // seq_length


# RNN based language model
class RNNLM(nn.Module):
    def __init__(self, vocab_size, embed_size, hidden_size, num_layers):
        super(RNNLM, self).__init__()
        self.embed = nn.Embedding(vocab_size, embed_size)
        self.lstm = nn.LSTM(embed_size, hidden_size, num_layers, batch_first=True)
        self.linear = nn.Linear(hidden_size, vocab_size)

    def forward(self, x, h):
        # Embed word ids to vectors
        x = self.embed(x)
        # Forward propagate LSTM
        out, (h, c) = self.lstm(x, h)
        # Reshape output to (batch_size*sequence_length, hidden_size)
        out = out.reshape(out.size(0) * out.size(1), out.size(2))
        # Decode hidden states of all time steps
        out = self.linear(out)
        return out, (h, c)


# Truncated backpropagation
def detach(states):
    return [state.detach() for state in states]


if __name__ == "__main__":
    model = RNNLM(vocab_size, embed_size, hidden_size, num_layers).to(device)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    # Loss and optimizer
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)

    steps, states_with_graph = 0, 0
    # Train the model
    for epoch in range(num_epochs):
        # Set initial hidden and cell states
        states = (torch.zeros(num_layers, batch_size, hidden_size).to(device),
                  torch.zeros(num_layers, batch_size, hidden_size).to(device))

        for i in range(0, ids.size(1) - seq_length, seq_length):
            # Get mini-batch inputs and targets
            inputs = ids[:, i:i + seq_length].to(device)
            targets = ids[:, (i + 1):(i + 1) + seq_length].to(device)

            # Forward pass
            states = detach(states)
            states_with_graph += sum(s.grad_fn is not None or s.requires_grad for s in states)
            outputs, states = model(inputs, states)
            loss = criterion(outputs, targets.reshape(-1))

            # Backward and optimize
            model.zero_grad()
            loss.backward()
            clip_grad_norm_(model.parameters(), 0.5)
            optimizer.step()
            steps += 1

            step = (i + 1) // seq_length
            if step % 100 == 0:
                print('Epoch [{}/{}], Step[{}/{}], Loss: {:.4f}'
                      .format(epoch + 1, num_epochs, step, num_batches, loss.item()))

    assert steps == num_epochs * len(range(0, ids.size(1) - seq_length, seq_length))
    assert states_with_graph == 0
    with torch.no_grad():
        assert all(not torch.equal(before[n], p) for n, p in model.named_parameters())
    print("evidence holds: every truncated chunk backpropagates on its own and all weights train")
