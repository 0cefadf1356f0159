# source: https://github.com/jwyang/faster-rcnn.pytorch/issues/543
# category: DL102
# expect: flag 52, 53, 54, 55
# evidence: the .data.resize_ calls change only the aliases: im_data stays a 1-element placeholder and fasterRCNN(im_data, ...) raises "Expected 3D (unbatched) or 4D (batched) input to conv2d"
import numpy as np
import torch
import torch.nn as nn


class _fasterRCNN(nn.Module):
    """Tiny stand-in: a conv backbone, an RPN score head and a box classifier."""

    def __init__(self, classes):
        super(_fasterRCNN, self).__init__()
        self.n_classes = len(classes)
        self.RCNN_base = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True))
        self.RCNN_rpn = nn.Conv2d(8, 2, 1)
        self.RCNN_cls_score = nn.Linear(8, self.n_classes)

    def forward(self, im_data, im_info, gt_boxes, num_boxes):
        base_feat = self.RCNN_base(im_data)
        rpn_score = self.RCNN_rpn(base_feat)
        pooled = base_feat.mean(dim=(2, 3))
        cls_prob = torch.softmax(self.RCNN_cls_score(pooled), 1)
        scale = im_info[0][2]
        rois = rpn_score.flatten(1)[:, :4] / scale
        return rois, cls_prob


def _get_image_blob(im):
    im_scale = 0.5
    blob = im[np.newaxis, ::2, ::2, :].astype(np.float32)
    return blob, np.array([im_scale])


def demo(fasterRCNN, images):
    # initilize the tensor holder here.
    im_data = torch.FloatTensor(1)
    im_info = torch.FloatTensor(1)
    num_boxes = torch.LongTensor(1)
    gt_boxes = torch.FloatTensor(1)

    fasterRCNN.eval()
    detections = []
    with torch.no_grad():
        for im in images:
            blobs, im_scales = _get_image_blob(im)
            im_info_np = np.array([[blobs.shape[1], blobs.shape[2], im_scales[0]]], dtype=np.float32)
            im_data_pt = torch.from_numpy(blobs).permute(0, 3, 1, 2)
            im_info_pt = torch.from_numpy(im_info_np)

            im_data.data.resize_(im_data_pt.size()).copy_(im_data_pt)
            im_info.data.resize_(im_info_pt.size()).copy_(im_info_pt)
            gt_boxes.data.resize_(1, 1, 5).zero_()
            num_boxes.data.resize_(1).zero_()

            rois, cls_prob = fasterRCNN(im_data, im_info, gt_boxes, num_boxes)
            detections.append((rois, cls_prob))
    return detections


if __name__ == "__main__":
    torch.manual_seed(0)
    fasterRCNN = _fasterRCNN(("__background__", "person", "car"))
    images = [np.random.RandomState(0).rand(16, 16, 3)]
    try:
        demo(fasterRCNN, images)
    except RuntimeError as err:
        assert "Expected 3D (unbatched) or 4D (batched) input to conv2d" in str(err), str(err)
    else:
        raise AssertionError("the detector should have been fed the 1-element placeholder")
    print("evidence holds: im_data was never resized, fasterRCNN(im_data, ...) got the 1-element placeholder and raised")
