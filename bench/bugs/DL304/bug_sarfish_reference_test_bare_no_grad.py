# source: https://github.com/DIUx-xView/SARFish/blob/bfef9694946d192ce7f66c5c5f97d5be364de02c/reference/3_test.py
# category: DL304
# expect: flag 45, 46, 47
# evidence: the bare torch.no_grad() before the test loop changes nothing: the tiles' boxes and scores carry a grad_fn (hence the .detach() calls)
import numpy as np
import torch
from torch import nn

config = {
    "CREATE_TILE": {"TileSize": 32, "TileOverlap": 8},
    "TEST": {"ScoreThreshold": 0.1},
}


class SARFishModel(nn.Module):
    """Stand-in for the Faster R-CNN: returns one dict of boxes, scores, labels per image."""

    def __init__(self, num_classes=4, num_boxes=5):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(2, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.box_head = nn.Linear(8, num_boxes * 4)
        self.cls_head = nn.Linear(8, num_boxes * num_classes)
        self.num_boxes, self.num_classes = num_boxes, num_classes

    def forward(self, images):
        feats = self.backbone(images)
        boxes = torch.sigmoid(self.box_head(feats)).view(-1, self.num_boxes, 4) * images.shape[-1]
        logits = self.cls_head(feats).view(-1, self.num_boxes, self.num_classes)
        scores, labels = logits.softmax(-1).max(-1)
        return [{'boxes': b, 'scores': s, 'labels': l} for b, s, l in zip(boxes, scores, labels)]


def convertVesselClassToValues(label):
    return (label in (2, 3), label == 3)


def main(model, test_data_loader, testFileList):
    tileSize = int(config["CREATE_TILE"]["TileSize"])
    tileOverlap = int(config["CREATE_TILE"]["TileOverlap"])
    scoreThreshold = float(config["TEST"]["ScoreThreshold"])

    model.eval()

    allOut = []
    torch.no_grad()
    for testId, (image, targets) in enumerate(test_data_loader):
        out = model(image)
        boxesTensor = out[0]['boxes']
        numDetect = len(boxesTensor)
        if numDetect == 0:
            continue
        # format the output to Numpy
        boxesNumpy = boxesTensor.cpu().detach().numpy()
        scoresNumpy = out[0]['scores'].cpu().detach().numpy()
        labelsNumpy = out[0]['labels'].cpu().detach().numpy()
        isGoodScore = scoresNumpy > scoreThreshold
        scoresNumpy = scoresNumpy[isGoodScore]
        labelsNumpy = labelsNumpy[isGoodScore]
        boxesNumpy = boxesNumpy[isGoodScore, :]
        for bId in range(len(scoresNumpy)):
            tx, ty = testFileList[testId]
            oneRow = {
                'detect_scene_column': np.mean(boxesNumpy[bId, [0, 2]]) + tx * (tileSize - tileOverlap),
                'detect_scene_row': np.mean(boxesNumpy[bId, [1, 3]]) + ty * (tileSize - tileOverlap),
                'score': scoresNumpy[bId],
            }
            oneRow['is_vessel'], oneRow['is_fishing'] = convertVesselClassToValues(int(labelsNumpy[bId]))
            allOut.append(oneRow)
    return allOut, out


if __name__ == "__main__":
    torch.manual_seed(0)
    model = SARFishModel(num_classes=4)
    tiles = [(torch.randn(1, 2, 32, 32), None) for _ in range(4)]
    testFileList = [(0, 0), (0, 1), (1, 0), (1, 1)]
    allOut, last_out = main(model, tiles, testFileList)
    assert torch.is_grad_enabled()
    assert all(last_out[0][k].grad_fn is not None for k in ('boxes', 'scores'))
    try:
        last_out[0]['scores'].numpy()
        raise AssertionError("expected numpy() to refuse a tensor that requires grad")
    except RuntimeError as err:
        assert "requires grad" in str(err)
    assert len(allOut) > 0
    print("evidence holds: the test loop's boxes and scores carry a grad_fn; without .detach() numpy() raises")
