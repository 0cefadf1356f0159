# source: https://github.com/AstarLight/Lets_OCR/issues/57
# category: DL102
# expect: flag 14
# evidence: loadData resizes only the .data alias, so `image` keeps its placeholder shape (2, 3, 32, 32) and crnn(image) raises "expected input[2, 3, 32, 32] to have 1 channels"
import torch
import torch.nn as nn
import torch.optim as optim

imgH = 32
batchSize = 2


def loadData(v, data):
    v.data.resize_(data.size()).copy_(data)


class strLabelConverter(object):
    def __init__(self, alphabet):
        self.dict = {char: i + 1 for i, char in enumerate(alphabet)}

    def encode(self, text):
        length = [len(s) for s in text]
        flat = [self.dict[char] for s in text for char in s]
        return torch.IntTensor(flat), torch.IntTensor(length)


class CRNN(nn.Module):
    def __init__(self, imgH, nc, nclass, nh):
        super(CRNN, self).__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(nc, 8, 3, 1, 1), nn.ReLU(True), nn.MaxPool2d(2, 2),
            nn.Conv2d(8, 16, 3, 1, 1), nn.ReLU(True), nn.AdaptiveAvgPool2d((1, None)),
        )
        self.rnn = nn.LSTM(16, nh, bidirectional=True)
        self.embedding = nn.Linear(nh * 2, nclass)

    def forward(self, input):
        conv = self.cnn(input)
        conv = conv.squeeze(2).permute(2, 0, 1)  # [w, b, c]
        recurrent, _ = self.rnn(conv)
        T, b, h = recurrent.size()
        output = self.embedding(recurrent.view(T * b, h)).view(T, b, -1)
        return output.log_softmax(2)


alphabet = "0123456789"
converter = strLabelConverter(alphabet)
crnn = CRNN(imgH, 1, len(alphabet) + 1, 8)
criterion = nn.CTCLoss(zero_infinity=True)

image = torch.FloatTensor(batchSize, 3, imgH, imgH)
text = torch.IntTensor(batchSize * 5)
length = torch.IntTensor(batchSize)


def trainBatch(net, criterion, optimizer, train_iter):
    data = next(train_iter)
    cpu_images, cpu_texts = data
    batch_size = cpu_images.size(0)
    loadData(image, cpu_images)
    t, l = converter.encode(cpu_texts)
    loadData(text, t)
    loadData(length, l)

    preds = net(image)
    preds_size = torch.IntTensor([preds.size(0)] * batch_size)
    cost = criterion(preds, text, preds_size, length) / batch_size
    net.zero_grad()
    cost.backward()
    optimizer.step()
    return cost


if __name__ == "__main__":
    torch.manual_seed(0)
    optimizer = optim.Adam(crnn.parameters(), lr=0.001)
    batch = (torch.rand(batchSize, 1, imgH, 100), ["123", "4567"])
    train_iter = iter([batch])
    try:
        trainBatch(crnn, criterion, optimizer, train_iter)
    except RuntimeError as err:
        assert "to have 1 channels, but got 3 channels instead" in str(err), str(err)
    else:
        raise AssertionError("crnn should have been fed the stale placeholder")
    assert tuple(image.shape) == (batchSize, 3, imgH, imgH)
    print("evidence holds: loadData left `image` at its placeholder shape and crnn(image) raised the channel-mismatch error")
