Bx_zero_pointJ
