"""``padconv verify``: built-in cases (:mod:`.cases`) and ONNX backend-test cases
(:mod:`.onnx_suite`) run (:mod:`.runner`), compared (:mod:`.compare`), rendered (:mod:`.report`).
"""
