"""video_processing (FunctionBench): with OpenCV, read /data/video.avi,
convert each frame to grayscale, write the frames to /tmp as MJPG, read
the result back."""

import cv2

from fbserve import serve

cv2.setNumThreads(0)
SOURCE = "/data/video.avi"
OUT = "/tmp/video-gray.avi"


def work():
    cap = cv2.VideoCapture(SOURCE)
    fps = cap.get(cv2.CAP_PROP_FPS) or 25.0
    out = None
    frames = 0
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        gray = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
        if out is None:
            h, w = gray.shape
            out = cv2.VideoWriter(OUT, cv2.VideoWriter_fourcc(*"MJPG"), fps, (w, h), False)
        out.write(gray)
        frames += 1
    cap.release()
    if out is None:
        raise ValueError(f"no frames in {SOURCE}")
    out.release()
    back = cv2.VideoCapture(OUT)
    read = 0
    while back.read()[0]:
        read += 1
    back.release()
    return f"video_processing frames={frames} read_back={read}"


serve(work)
