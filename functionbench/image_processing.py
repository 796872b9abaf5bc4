"""image_processing (FunctionBench): Pillow flips, rotations, filters,
grayscale and a thumbnail of /data/small.jpg (640x480), each encoded back
to JPEG in memory."""

import io

from PIL import Image, ImageFilter

from fbserve import serve

with open("/data/small.jpg", "rb") as f:
    SOURCE = f.read()


def encode(img):
    buf = io.BytesIO()
    img.convert("RGB").save(buf, format="JPEG")
    return len(buf.getvalue())


def work():
    img = Image.open(io.BytesIO(SOURCE))
    img.load()
    out = [
        img.transpose(Image.Transpose.FLIP_LEFT_RIGHT),
        img.transpose(Image.Transpose.FLIP_TOP_BOTTOM),
        img.transpose(Image.Transpose.ROTATE_90),
        img.transpose(Image.Transpose.ROTATE_180),
        img.transpose(Image.Transpose.ROTATE_270),
        img.filter(ImageFilter.BLUR),
        img.filter(ImageFilter.CONTOUR),
        img.filter(ImageFilter.SHARPEN),
        img.convert("L"),
    ]
    thumb = img.copy()
    thumb.thumbnail((128, 128))
    out.append(thumb)
    total = sum(encode(i) for i in out)
    return f"image_processing {img.size[0]}x{img.size[1]} outputs={len(out)} bytes={total}"


serve(work)
