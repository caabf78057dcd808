// padconv native Conv: the depthwise kernels (C/G == 1), included by conv_impl.h inside its
// anonymous namespace, after the helpers they share with the GEMM kernels (gather_row,
// split_phases, the row coordinates).
//
// Every output element is the chain  acc = 0; acc = fma(W[m, kh, kw], Xpad[...], acc)  over
// the taps in C order (kh, then kw), padding included as zeros (so that an infinite weight
// times the padding is nan, as ONNX's zero padding makes it), then + B[m]: the same chain on
// every path below, so their bits agree with each other and with any tiling of the tensor.
//
// A task is a block of output rows of one image and one group (C/G == 1: one input channel).
//   - direct (dw_block DW_DIRECT; 2-D, stride 1 along the width, X of the sums' type): X is
//     read in place, the padding and the ends of the rows by masked loads -- no copy at all.
//   - block (DW_BLOCK; 2-D, stride 1 along the width, X float16/bfloat16): the task's input
//     rows are widened once into a zero-padded block.
//   - rows (otherwise: 1-D, 3-D and more, strided widths): the input rows under each outer tap
//     are copied zero-padded and split into stride phases, kept while the next rows use them.

// Whether A and B are one type (the direct kernel reads X as the sums' type).
template <typename A, typename B> struct SameType { static const bool value = false; };
template <typename A> struct SameType<A, A> { static const bool value = true; };

// The epilogue of a depthwise register block: *bias added to every lane (when given), then
// the DW_NV vectors stored at `out`, directly when `whole` (the block ends inside the row, or
// spills only onto positions computed after it), else through `tail`, of which the first
// `count` elements are copied.
template <typename T>
PADCONV_TILE_INLINE void dw_store(typename VecOf<T>::V::type (&acc)[DW_NV], const T* bias,
                                  T* out, bool whole, long count, T* tail) {
    typedef typename VecOf<T>::V V;
    if (bias) {
        const typename V::type b = V::bcast(*bias);
        for (int v = 0; v < DW_NV; ++v) acc[v] = V::add(acc[v], b);
    }
    if (whole) {
        for (int v = 0; v < DW_NV; ++v) V::store(out + v * V::lanes, acc[v]);
    } else {
        for (int v = 0; v < DW_NV; ++v) V::store(tail + v * V::lanes, acc[v]);
        memcpy(out, tail, count * sizeof(T));
    }
}

// Vector registers of the instruction set: 32 with 512-bit vectors (AVX-512), else 16.
const int DW_REGISTERS = sizeof(VecF::type) >= 64 ? 32 : 16;

// The direct kernel's sizes, copied out of the job once per run: stores into Y may alias the
// job for the compiler, which would then reload every field after each store.
struct DwShape {
    long IH, IW, L, KH, KW, SH, DH, DW, PH, PW;
    explicit DwShape(const ConvJob& J)
        : IH(J.in[0]), IW(J.in[1]), L(J.out[1]), KH(J.k[0]), KW(J.k[1]), SH(J.s[0]),
          DH(J.d[0]), DW(J.d[1]), PH(J.pb[0]), PW(J.pb[1]) {}
};

// Adds the bias to R rows of N vectors of sums and stores them at y, y + ystride, ...: the
// first `count` positions of each row (the last vector in part).
template <typename T, int N, int R>
PADCONV_TILE_INLINE void store_rows(typename VecOf<T>::V::type (&acc)[R][N], const T* bias,
                                    T* y, long ystride, long count) {
    typedef typename VecOf<T>::V V;
    const typename V::type b = bias ? V::bcast(*bias) : V::zero();
    for (int i = 0; i < R; ++i) {
        T* out = y + i * ystride;
        for (int v = 0; v < N; ++v) {
            const typename V::type sum = bias ? V::add(acc[i][v], b) : acc[i][v];
            const long left = count - v * V::lanes;
            if (left >= V::lanes) V::store(out + v * V::lanes, sum);
            else if (left > 0) V::store_first(out + v * V::lanes, sum, int(left));
        }
    }
}

// Which vectors of a run of N are at an edge (EDGE_FIRST, EDGE_LAST: some tap of that vector
// reads past an end of the input row, or it ends past the output row): their loads are masked
// by parts[kw][v] to the lanes inside both; every other load is plain.
enum { EDGE_FIRST = 1, EDGE_LAST = 2 };
template <int EDGE, int N>
constexpr bool masked(int v) {
    return ((EDGE & EDGE_FIRST) && v == 0) || ((EDGE & EDGE_LAST) && v == N - 1);
}

// Positions j0 .. j0 + count - 1 (count <= N * lanes) of output rows r .. r + R - 1 of one
// channel, their R * N vectors of sums in registers (direct kernel): x is the input plane, wm
// the channel's KH * KW weights, y the output plane.  EDGE: the vectors at an edge (above).
// BORDER: some row lies in the padding (the first and last rows), else every tap's row is
// inside X.  KC: KH = KW when the kernel is square 3, 5 or 7 (its taps unrolled), else 0.
template <typename T, int KC, int N, int R, int EDGE, bool BORDER>
PADCONV_TILE_INLINE void depthwise_direct_block(const DwShape& G, const T* x, const T* wm,
                                                const T* bias, T* y, long r, long j0, long count,
                                                const typename VecOf<T>::V::part (*parts)[N]) {
    typedef typename VecOf<T>::V V;
    typedef typename V::type Vec;
    const long KH = KC ? KC : G.KH, KW = KC ? KC : G.KW;
    const Vec zero = V::zero();
    Vec acc[R][N];
    for (int i = 0; i < R; ++i)
        for (int v = 0; v < N; ++v) acc[i][v] = zero;
    const T* first = x + (r * G.SH - G.PH) * G.IW;  // row kh = 0 of output row r (when inside)
    for (long kh = 0; kh < KH; ++kh) {
        const T* rows[R];  // null: a row of padding (its taps add w * 0), only when BORDER
        for (int i = 0; i < R; ++i) {
            const long ih = (r + i) * G.SH - G.PH + kh * G.DH;
            rows[i] = BORDER && (ih < 0 || ih >= G.IH)
                          ? nullptr
                          : first + (i * G.SH + kh * G.DH) * G.IW;
        }
        const T* wk = wm + kh * KW;
        for (long kw = 0; kw < KW; ++kw) {
            const Vec a = V::bcast(wk[kw]);
            const long col = j0 - G.PW + kw * G.DW;
            for (int i = 0; i < R; ++i) {
                for (int v = 0; v < N; ++v) {
                    const long at = col + v * V::lanes;
                    const Vec b = BORDER && !rows[i] ? zero
                                  : masked<EDGE, N>(v) ? V::load_part(rows[i], at, parts[kw][v])
                                         : V::load(rows[i] + at);
                    acc[i][v] = V::fma(a, b, acc[i][v]);
                }
            }
        }
    }
    store_rows<T, N, R>(acc, bias, y + r * G.L + j0, G.L, count);
}

// One input row (output row t's tap kh = 0) of depthwise_direct_rolling: each of its vectors
// loaded once per kw and added into every output row o = t - kh that reads it (those in
// [r0, r1) when CHECK), into slot (U - kh) mod KC (U = t mod KC); then output row t - (KC - 1),
// complete, stored from its slot (when in [r0, r1) or not CHECK), B added when BIAS, and the
// slot zeroed.  Only a vector at an edge can end past the row: the others are stored whole.
template <typename T, int KC, int N, int EDGE, bool CHECK, int U, bool HOLD, bool BIAS>
PADCONV_TILE_INLINE void depthwise_rolling_row(
    const DwShape G, const T* x, const T* wm, const typename VecOf<T>::V::type (&w)[KC * KC],
    typename VecOf<T>::V::type (&acc)[KC][N], long t, long r0, long r1, const T* bias,
    T* y, long j0, long count, const typename VecOf<T>::V::part (*parts)[N]) {
    typedef typename VecOf<T>::V V;
    typedef typename V::type Vec;
    const int last = int(count - (N - 1) * V::lanes);  // positions of the last vector
    const T* row = x + (t - G.PH) * G.IW;
    for (int kw = 0; kw < KC; ++kw) {
        for (int v = 0; v < N; ++v) {
            const long col = j0 - G.PW + kw * G.DW + v * V::lanes;
            const Vec b = masked<EDGE, N>(v) ? V::load_part(row, col, parts[kw][v])
                                             : V::load(row + col);
            for (int kh = 0; kh < KC; ++kh) {
                if (CHECK && (t - kh < r0 || t - kh >= r1)) continue;
                const Vec a = HOLD ? w[kh * KC + kw] : V::bcast(wm[kh * KC + kw]);
                acc[(U - kh + KC) % KC][v] = V::fma(a, b, acc[(U - kh + KC) % KC][v]);
            }
        }
    }
    const long done = t - (KC - 1);
    if (CHECK && (done < r0 || done >= r1)) return;
    constexpr int S = (U + 1) % KC;
    T* out = y + done * G.L + j0;
    for (int v = 0; v < N; ++v) {
        const Vec sum = BIAS ? V::add(acc[S][v], V::bcast(*bias)) : acc[S][v];
        if (v < N - 1 || !masked<EDGE, N>(v)) V::store(out + v * V::lanes, sum);
        else V::store_first(out + v * V::lanes, sum, last);
        acc[S][v] = V::zero();
    }
}

// Input rows t - PH for t in [base + U, base + KC) (base a multiple of KC) of
// depthwise_direct_rolling, each with its slot a constant; rows outside [r0, end) left out.
template <typename T, int KC, int N, int EDGE, bool CHECK, bool HOLD, bool BIAS, int U = 0>
PADCONV_TILE_INLINE void depthwise_rolling_group(
    const DwShape G, const T* x, const T* wm, const typename VecOf<T>::V::type (&w)[KC * KC],
    typename VecOf<T>::V::type (&acc)[KC][N], long base, long r0, long r1, long end,
    const T* bias, T* y, long j0, long count, const typename VecOf<T>::V::part (*parts)[N]) {
    if constexpr (U < KC) {
        const long t = base + U;
        if (!CHECK || (t >= r0 && t < end))
            depthwise_rolling_row<T, KC, N, EDGE, CHECK, U, HOLD, BIAS>(
                G, x, wm, w, acc, t, r0, r1, bias, y, j0, count, parts);
        depthwise_rolling_group<T, KC, N, EDGE, CHECK, HOLD, BIAS, U + 1>(
            G, x, wm, w, acc, base, r0, r1, end, bias, y, j0, count, parts);
    }
}

// Output rows r0 .. r1 - 1 whose every tap reads inside X, with unit stride and dilation along
// the rows and a known square kernel (KC): each input row is loaded once per kw and added into
// the KC output rows that read it, whose sums stay in registers (slot o mod KC for output row
// o) until their last tap.  Each output row still gets its taps in C order (kh, then kw), so
// the sums are the same bits.  The groups of KC input rows whose every tap lands in [r0, r1)
// run in a loop of their own, unchecked, and whether B is added is decided outside the loops:
// with either decided inside, GCC kept part of the sums on the stack (3x3 over rows of 56 and
// 112, AVX-512: 4% and 20% faster without, one thread and two).  G is passed by value for the
// same reason: a masked store may write anything, and the fields of a G in memory were read
// again after each.
template <typename T, int KC, int N, int EDGE, bool HOLD>
PADCONV_TILE_INLINE void depthwise_direct_rolling(const DwShape G, const T* x, const T* wm,
                                                  const T* bias, T* y, long r0, long r1,
                                                  long j0, long count,
                                                  const typename VecOf<T>::V::part (*parts)[N]) {
    typedef typename VecOf<T>::V V;
    typename V::type w[KC * KC], acc[KC][N];
    for (int t = 0; HOLD && t < KC * KC; ++t) w[t] = V::bcast(wm[t]);
    for (int i = 0; i < KC; ++i)
        for (int v = 0; v < N; ++v) acc[i][v] = V::zero();
    // t: the output row that input row t - PH gives its tap kh = 0; rows t in [r0, r1 + KC - 1)
    // are read, in groups of KC from a multiple of KC (so that every slot is a constant)
    const long end = r1 + KC - 1;
    auto groups = [&](auto with_bias) {
        constexpr bool BIAS = decltype(with_bias)::value;
        long base = r0 - r0 % KC;
        for (; base < end && base < r0 + KC - 1; base += KC)
            depthwise_rolling_group<T, KC, N, EDGE, true, HOLD, BIAS>(
                G, x, wm, w, acc, base, r0, r1, end, bias, y, j0, count, parts);
        for (; base + KC <= r1; base += KC)  // every row of the group in [r0, r1)
            depthwise_rolling_group<T, KC, N, EDGE, false, HOLD, BIAS>(
                G, x, wm, w, acc, base, r0, r1, end, bias, y, j0, count, parts);
        for (; base < end; base += KC)
            depthwise_rolling_group<T, KC, N, EDGE, true, HOLD, BIAS>(
                G, x, wm, w, acc, base, r0, r1, end, bias, y, j0, count, parts);
    };
    if (bias) groups(std::true_type());
    else groups(std::false_type());
}

// Positions j0 .. j0 + count - 1 (N vectors) of output rows r0 .. r1 - 1 of one channel, the
// rows taken R at a time so that at least 4 chains of sums are in flight (a chain is one
// fused multiply-add after another), or all at once sharing their input rows' loads
// (depthwise_direct_rolling); EDGE's masks are worked out once for all the rows.
template <typename T, int KC, int N, int EDGE>
void depthwise_direct_columns(const DwShape& G, const T* x, const T* w_channel, const T* bias,
                              T* y, long r0, long r1, long j0, long count) {
    typedef typename VecOf<T>::V V;
    const long KW = KC ? KC : G.KW;
    T w_local[KC ? KC * KC : 1];  // a known kernel's weights, out of reach of Y's stores
    for (long t = 0; KC && t < KC * KC; ++t) w_local[t] = w_channel[t];
    const T* wm = KC ? w_local : w_channel;
    const T b_local = bias ? *bias : T(0);
    const T* b = bias ? &b_local : nullptr;
    typename V::part parts[KC ? KC : (EDGE ? PADCONV_DW_TAPS : 1)][N];
    for (long kw = 0; EDGE && kw < KW; ++kw) {
        for (int v = 0; v < N; ++v) {
            if (!masked<EDGE, N>(v)) continue;
            const long col = j0 - G.PW + kw * G.DW + v * V::lanes;
            const long lo = min_l(V::lanes, max_l(0, -col));
            const long hi = max_l(lo, min_l(V::lanes, min_l(G.IW - col, count - v * V::lanes)));
            parts[kw][v] = V::part_of(int(lo), int(hi));
        }
    }
    // rows ri0 .. ri1 - 1 read only rows inside X
    const RowsInside inside(G.IH, G.PH, G.KH, G.DH, G.SH);
    const long ri0 = max_l(r0, min_l(r1, inside.first));
    const long ri1 = max_l(ri0, min_l(r1, inside.end));
    const int R = N >= 4 ? 1 : N >= 2 ? 2 : 4;
    long r = r0;
    for (; r < ri0; ++r)
        depthwise_direct_block<T, KC, N, 1, EDGE, true>(G, x, wm, b, y, r, j0, count, parts);
    // input rows shared by the KC output rows that read them, when their sums, one input
    // row's vectors and the weights fit in the vector registers (hold); with 16 registers
    // (AVX2), also when only the sums and one input row's vectors fit, each weight broadcast
    // where it is used (measured on 3x3: 15-25% faster than blocks of rows; with 32, AVX-512,
    // 20% slower on a 5x5 than blocks of rows)
    constexpr bool hold = KC * N + N + KC * KC <= DW_REGISTERS;
    constexpr bool fits = hold || (DW_REGISTERS < 32 && KC * N + N + 1 <= DW_REGISTERS);
    if constexpr (KC != 0 && fits) {  // (not compiled where it cannot run)
        if (G.SH == 1 && G.DH == 1 && r < ri1) {
            depthwise_direct_rolling<T, KC ? KC : 1, N, EDGE, hold>(G, x, wm, b, y, r, ri1, j0,
                                                                    count, parts);
            r = ri1;
        }
    }
    for (; r + R <= ri1; r += R)
        depthwise_direct_block<T, KC, N, R, EDGE, false>(G, x, wm, b, y, r, j0, count, parts);
    for (; r < ri1; ++r)
        depthwise_direct_block<T, KC, N, 1, EDGE, false>(G, x, wm, b, y, r, j0, count, parts);
    for (; r < r1; ++r)
        depthwise_direct_block<T, KC, N, 1, EDGE, true>(G, x, wm, b, y, r, j0, count, parts);
}

// depthwise_direct_columns for a run of n (1 .. DW_NV) vectors, N made a compile-time count.
template <typename T, int KC, int EDGE>
void depthwise_direct_run(const DwShape& G, const T* x, const T* wm, const T* bias, T* y,
                          long r0, long r1, long j0, long count, long n) {
    switch (n) {
        case 1:  // a lone vector at either edge is both first and last: one variant
            return depthwise_direct_columns<T, KC, 1, EDGE ? EDGE_FIRST : 0>(G, x, wm, bias, y,
                                                                             r0, r1, j0, count);
#if PADCONV_DW_NV >= 2
        case 2:
            return depthwise_direct_columns<T, KC, 2, EDGE>(G, x, wm, bias, y, r0, r1, j0,
                                                              count);
#endif
#if PADCONV_DW_NV >= 3
        case 3:
            return depthwise_direct_columns<T, KC, 3, EDGE>(G, x, wm, bias, y, r0, r1, j0,
                                                              count);
#endif
#if PADCONV_DW_NV >= 4
        case 4:
            return depthwise_direct_columns<T, KC, 4, EDGE>(G, x, wm, bias, y, r0, r1, j0,
                                                              count);
#endif
        default: return;
    }
}

// depthwise_direct_run with the run's EDGE (0 .. 3) made a compile-time value.  float64 runs
// take one variant, both ends masked (a mask of every lane reads what a plain load reads):
// a quarter of the code to compile, for the type that is rarely timed.
template <typename T, int KC>
void depthwise_direct_edges(const DwShape& G, const T* x, const T* wm, const T* bias, T* y,
                            long r0, long r1, long j0, long count, long n, int edge) {
    if constexpr (!SameType<T, float>::value)
        return depthwise_direct_run<T, KC, EDGE_FIRST | EDGE_LAST>(G, x, wm, bias, y, r0, r1, j0,
                                                                   count, n);
    switch (edge) {
        case 0: return depthwise_direct_run<T, KC, 0>(G, x, wm, bias, y, r0, r1, j0, count, n);
        case EDGE_FIRST:
            return depthwise_direct_run<T, KC, EDGE_FIRST>(G, x, wm, bias, y, r0, r1, j0, count,
                                                           n);
        case EDGE_LAST:
            return depthwise_direct_run<T, KC, EDGE_LAST>(G, x, wm, bias, y, r0, r1, j0, count,
                                                          n);
        default:
            return depthwise_direct_run<T, KC, EDGE_FIRST | EDGE_LAST>(G, x, wm, bias, y, r0, r1,
                                                                       j0, count, n);
    }
}

// Output rows in a band stay in L2 while the runs sweep them (8 rows: a third of the time
// went to blocks of one row at the ends of the bands, measured on rows of 56).
const long DW_BAND_ROWS = 64;

// Output rows r0 .. r1 - 1 of one channel (direct kernel), in bands of DW_BAND_ROWS rows: the
// width of a band cut into runs of at most DW_NV vectors, of which only the first and the last
// may be at an edge (some tap of a lane reads past an end of the input row, or the vector ends
// past the output row), each run over the band's rows in turn.  A row of at most DW_NV vectors
// is one run: each input row is loaded once per block.
template <typename T, int KC>
void depthwise_direct_rows(const ConvJob& J, const T* x, const T* wm, const T* bias, T* y,
                           long r0, long r1) {
    const long lanes = VecOf<T>::V::lanes;
    const long L = J.out[1], KW = KC ? KC : J.k[1], PW = J.pb[1];
    // a vector at j is inside when j >= PW and j + lanes <= inside_end
    const long inside_end = min_l(L, J.in[1] + PW - (KW - 1) * J.d[1]);
    auto inside = [&](long j) { return j >= PW && j + lanes <= inside_end; };
    const DwShape G(J);
    for (long band = r0; band < r1; band += DW_BAND_ROWS) {
        const long end = min_l(r1, band + DW_BAND_ROWS);
        for (long j0 = 0; j0 < L;) {
            long n = 1;  // a vector joins while the one before it is the first or inside
            while (n < DW_NV && j0 + n * lanes < L && (n == 1 || inside(j0 + (n - 1) * lanes)))
                ++n;
            const bool last_edge = n > 1 && !inside(j0 + (n - 1) * lanes);
            const int edge = (inside(j0) ? 0 : EDGE_FIRST) | (last_edge ? EDGE_LAST : 0);
            const long count = min_l(n * lanes, L - j0);
            depthwise_direct_edges<T, KC>(G, x, wm, bias, y, band, end, j0, count, n, edge);
            j0 += n * lanes;
        }
    }
}

// The direct kernel's task: output rows of one image and channel group, X read in place.
template <typename T>
void depthwise_direct_task(const ConvJob& J, long task) {
    const long rb = task % J.row_blocks, image_group = task / J.row_blocks;
    const long g = image_group % J.group, n = image_group / J.group;
    const long r0 = rb * J.rows, r1 = min_l(J.outer_out, r0 + J.rows);
    const T* x = static_cast<const T*>(J.x) + (n * J.c + g) * J.in_plane;
    const T* w = static_cast<const T*>(J.w);
    const T* bias = static_cast<const T*>(J.bias);
    for (long mi = 0; mi < J.mg; ++mi) {
        const long m = g * J.mg + mi;
        T* y = static_cast<T*>(J.y) + (n * J.m + m) * J.out_plane;
        const T* b = bias ? bias + m : nullptr;
        const T* wm = w + m * J.taps;
        const long k = J.k[0] == J.k[1] ? J.k[0] : 0;  // float32's square 3, 5, 7 unrolled
        if constexpr (!SameType<T, float>::value)
            depthwise_direct_rows<T, 0>(J, x, wm, b, y, r0, r1);
        else if (k == 3) depthwise_direct_rows<T, 3>(J, x, wm, b, y, r0, r1);
        else if (k == 5) depthwise_direct_rows<T, 5>(J, x, wm, b, y, r0, r1);
        else if (k == 7) depthwise_direct_rows<T, 7>(J, x, wm, b, y, r0, r1);
        else depthwise_direct_rows<T, 0>(J, x, wm, b, y, r0, r1);
    }
}

// Depthwise, 2-D with stride 1 along rows, X of another type (dw_block DW_BLOCK): the task's
// output rows r0 .. r1 - 1 read the padded input rows r0 * s0 .. (r1 - 1) * s0 + (k0 - 1) * d0,
// which are copied once, zero-padded, into `block` (row_len elements each); then every output
// row sums its taps in C order (kh, then kw) straight from those rows.
template <typename T, typename S>
void depthwise_block_task(const ConvJob& J, long task, T* block) {
    typedef typename VecOf<T>::V V;
    const long width = DW_NV * V::lanes, len = J.row_len;
    const long L = J.out[1], KH = J.k[0], KW = J.k[1], SH = J.s[0], DH = J.d[0], DW = J.d[1];
    const long rb = task % J.row_blocks, image_group = task / J.row_blocks;
    const long g = image_group % J.group, n = image_group / J.group;
    const long r0 = rb * J.rows, r1 = min_l(J.outer_out, r0 + J.rows);
    const long first_in = r0 * SH - J.pb[0];  // input row of the block's first row
    const long in_rows = (r1 - 1 - r0) * SH + (KH - 1) * DH + 1;
    const S* x = static_cast<const S*>(J.x) + (n * J.c + g) * J.in_plane;
    for (long i = 0; i < in_rows; ++i) {
        const long row = first_in + i;
        if (row < 0 || row >= J.in[0]) memset(block + i * len, 0, len * sizeof(T));
        else gather_row(block + i * len, x + row * J.in[1], 0, len, -J.pb[1], 1, J.in[1]);
    }
    const T* w = static_cast<const T*>(J.w);
    const T* bias = static_cast<const T*>(J.bias);
    T tail[DW_NV * V::lanes];
    for (long mi = 0; mi < J.mg; ++mi) {
        const long m = g * J.mg + mi;
        const T* wm = w + m * J.taps;
        T* y = static_cast<T*>(J.y) + (n * J.m + m) * J.out_plane;
        for (long r = r0; r < r1; ++r) {
            const T* rows = block + (r - r0) * SH * len;
            T* out = y + r * L;
            for (long j0 = 0; j0 < L; j0 += width) {
                typename V::type acc[DW_NV];
                for (int v = 0; v < DW_NV; ++v) acc[v] = V::zero();
                for (long kh = 0; kh < KH; ++kh) {
                    const T* src = rows + kh * DH * len + j0;
                    for (long kw = 0; kw < KW; ++kw) {
                        const typename V::type a = V::bcast(wm[kh * KW + kw]);
                        const T* at = src + kw * DW;
                        for (int v = 0; v < DW_NV; ++v)
                            acc[v] = V::fma(a, V::load(at + v * V::lanes), acc[v]);
                    }
                }
                // a block may spill past the row into the task's next rows, computed after it
                dw_store(acc, bias ? bias + m : nullptr, out + j0,
                         j0 + width <= L || r * L + j0 + width <= r1 * L, L - j0, tail);
            }
        }
    }
}

template <typename T, typename S>
void depthwise_task(const ConvJob& J, long task, T* rows_buf) {
    if (J.dw_block == DW_DIRECT) {
        if constexpr (SameType<T, S>::value) depthwise_direct_task<T>(J, task);
        return;
    }
    if (J.dw_block == DW_BLOCK) {
        depthwise_block_task<T, S>(J, task, rows_buf);
        return;
    }
    typedef typename VecOf<T>::V V;
    const int last = J.rank - 1;
    const long L = J.out[last], KL = J.k[last], SL = J.s[last], DL = J.d[last];
    const long width = DW_NV * V::lanes;
    const long len = J.row_len, slot_size = SL * len;
    const long block = task % J.row_blocks, image_group = task / J.row_blocks;
    const long g = image_group % J.group, n = image_group / J.group;
    const long r0 = block * J.rows, r1 = min_l(J.outer_out, r0 + J.rows);
    const S* x = static_cast<const S*>(J.x) + (n * J.c + g) * J.in_plane;
    const T* w = static_cast<const T*>(J.w);
    const T* bias = static_cast<const T*>(J.bias);
    T* y = static_cast<T*>(J.y);
    T tail[DW_NV * V::lanes];
    // With few outer taps, the padded rows are kept in slots keyed by their input row, so that
    // the next output rows reuse the rows they share (slot_of[t] holds tap t's slot).
    const bool cached = J.dw_slots > J.outer_taps;
    long slot_key[PADCONV_DW_SLOTS], slot_stamp[PADCONV_DW_SLOTS], slot_of[PADCONV_DW_SLOTS];
    for (long i = 0; cached && i < J.dw_slots; ++i) {
        slot_key[i] = -2;  // empty
        slot_stamp[i] = -1;
    }
    // where tap kw of the last axis starts reading: phase (kw*d) % s, element (kw*d) / s
    auto tap_start_of = [&](long kw) { return (kw * DL % SL) * len + kw * DL / SL; };
    long tap_start[PADCONV_DW_TAPS];
    for (long kw = 0; kw < KL && kw < PADCONV_DW_TAPS; ++kw) tap_start[kw] = tap_start_of(kw);
    long o[PADCONV_MAX_RANK], kt[PADCONV_MAX_RANK];
    outer_coords(J, r0, o);
    for (long row = r0; row < r1; ++row, next_row(J, o)) {
        for (int i = 0; i < last; ++i) kt[i] = 0;
        for (long t = 0; t < J.outer_taps; ++t, next_tap(J, kt)) {
            const long offset = tap_row_offset(J, o, kt);
            long slot = t;
            if (cached) {
                long found = -1, oldest = -1;
                for (long i = 0; i < J.dw_slots && found < 0; ++i) {
                    if (slot_key[i] == offset) found = i;
                    else if (slot_stamp[i] < row &&
                             (oldest < 0 || slot_stamp[i] < slot_stamp[oldest]))
                        oldest = i;
                }
                slot = found >= 0 ? found : oldest;
                slot_of[t] = slot;
                slot_stamp[slot] = row;
                if (found >= 0) continue;
                slot_key[slot] = offset;
            }
            split_phases(rows_buf + slot * slot_size, offset < 0 ? (const S*)0 : x + offset, len,
                         SL, J.pb[last], J.in[last]);
        }
        for (long mi = 0; mi < J.mg; ++mi) {
            const long m = g * J.mg + mi;
            const T* wm = w + m * J.taps;
            T* out = y + (n * J.m + m) * J.out_plane + row * L;
            for (long j0 = 0; j0 < L; j0 += width) {
                typename V::type acc[DW_NV];
                for (int v = 0; v < DW_NV; ++v) acc[v] = V::zero();
                for (long t = 0; t < J.outer_taps; ++t) {
                    const T* rows_t = rows_buf + (cached ? slot_of[t] : t) * slot_size + j0;
                    for (long kw = 0; kw < KL; ++kw) {
                        const T* src = rows_t + (kw < PADCONV_DW_TAPS ? tap_start[kw]
                                                                      : tap_start_of(kw));
                        const typename V::type a = V::bcast(wm[t * KL + kw]);
                        for (int v = 0; v < DW_NV; ++v)
                            acc[v] = V::fma(a, V::load(src + v * V::lanes), acc[v]);
                    }
                }
                // a block may spill past the row into the next rows of this task, which are
                // computed (and overwritten) after it
                dw_store(acc, bias ? bias + m : nullptr, out + j0,
                         j0 + width <= L || row * L + j0 + width <= r1 * L, L - j0, tail);
            }
        }
    }
}
