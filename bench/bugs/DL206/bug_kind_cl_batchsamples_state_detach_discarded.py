# source: https://github.com/Savin-Lab-Code/kind_cl/blob/75f98e9f2afd77a846d5f813d84d4f35c126453c/dynamics/process/rnn/wt_kindergarten.py
# category: DL206
# expect: flag 60, 61, 63, 64, 66, 67
# evidence: batchsamples' detach calls throw their results away, so the state handed to the next window is still attached and its update raises "Trying to backward through the graph a second time"
import numpy as np
import torch
from torch import nn


class RNNModelSupervisable(nn.Module):
    """The RNN model that can also undergo supervised learning beforehand, in kindergarten()."""

    def __init__(self, din=4, dout=5, num_hiddens=16, rnntype='RNN', inputcase=11):
        super().__init__()
        if rnntype == 'GRU':
            self.rnn = nn.GRU(din, num_hiddens, batch_first=True)
        elif rnntype == 'LSTM':
            self.rnn = nn.LSTM(din, num_hiddens, batch_first=True)
        else:
            self.rnn = nn.RNN(din, num_hiddens, batch_first=True)
        self.num_hiddens = num_hiddens
        self.linear = nn.Linear(num_hiddens, dout)
        self.inputcase = inputcase

    def forward(self, inputs, state, isITI=False, device=torch.device('cpu')):
        Y, state = self.rnn(inputs, state)
        Y = Y.reshape((-1, Y.shape[-1]))
        output1 = self.linear(Y)
        output_supervised = output1[:, 2:]
        policy = nn.Softmax(dim=1)(output1[:, :2])
        return {'policy': policy, 'value': None, 'state': state, 'activations': None,
                'pred_supervised': output_supervised}

    def begin_state(self, device, batchsize=1):
        return torch.rand((1, batchsize, self.num_hiddens), device=device)

    def parseiputs(self, inp, inputcase=None):
        return inp


def batchsamples(net, inputs, si, device=torch.device('cpu')):
    """
    take a target network, run some samples through it
    :return outputs: produced outputs from network
    :return state: hidden state of network
    :return net: network
    """
    batchsize, nsteps, _ = inputs.shape
    inputs = net.parseiputs(inputs)

    output = net(inputs, si, isITI=False, device=device)
    state = output['state']  # state of network
    pred_supervised = output['pred_supervised']  # supervised output predictions for kindergarten

    outputs = torch.reshape(pred_supervised, (batchsize, nsteps, -1))
    outputs.requires_grad_(True)

    # detach states.
    if isinstance(state[0], tuple):  # multiregion
        [[k.detach() for k in sk] for sk in state]
        [[k.detach() for k in sk] for sk in si]
    elif isinstance(state, tuple) or isinstance(state, list):  # LSTM or mr RNN
        [k.detach() for k in state]
        [k.detach() for k in si]
    else:  # vanilla RNN, GRU
        state.detach()
        si.detach()

    return outputs, state, net


def update(updater, outputs, targets, lossinds=None):
    if lossinds is None:
        lossinds = [0, 1, 2]
    loss = nn.MSELoss()
    lval = loss(outputs[:, :, lossinds], targets[:, :, lossinds])
    updater.zero_grad()  # updaters accumulate gradients. zero out
    lval.backward()
    updater.step()
    return lval.detach().cpu().numpy()  # the value of the loss from that batch


def train(net, updater, si, inp, targ, device=torch.device('cpu'), nepoch=2, nsteps=10, lossinds=None):
    """update over multiple epochs; overlapping windows of nsteps within each epoch"""
    ltot_train = []
    inputs = torch.Tensor(inp).to(device)
    targets = torch.Tensor(targ).to(device)
    for epoch in range(nepoch):
        state = si
        ind = 0
        nbatch = int(inputs.shape[1] - nsteps + 1)  # run overlapping batches
        ltot_train_k = []
        for k in range(nbatch):
            inputs_k = inputs[:, ind:ind + nsteps, :]
            targets_k = targets[:, ind:ind + nsteps, :]
            outputs, state, net = batchsamples(net, inputs_k, state, device)
            loss_k = update(updater, outputs, targets_k, lossinds)
            ltot_train_k.append(loss_k)
            ind += 1
        ltot_train.append(ltot_train_k)
    return ltot_train


if __name__ == "__main__":
    torch.manual_seed(0)
    rng = np.random.RandomState(101)
    batchsize, nsteps_total = 8, 14
    inp = rng.rand(batchsize, nsteps_total, 4)
    targ = rng.rand(batchsize, nsteps_total, 3)
    net = RNNModelSupervisable(din=4, dout=5, rnntype='RNN')
    updater = torch.optim.Adam(net.parameters(), lr=1e-3)
    si = net.begin_state(device=torch.device('cpu'), batchsize=batchsize)
    try:
        train(net, updater, si, inp, targ, nsteps=10)
        raise AssertionError("expected the second window's update to fail")
    except RuntimeError as err:
        assert "Trying to backward through the graph a second time" in str(err), err
    print("evidence holds: the second overlapping window raises 'Trying to backward through the graph a second time'")
