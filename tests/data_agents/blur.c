/* Row blur with cache tiles and OpenMP threads: a plain C program (prints a checksum). */
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#define TILE 64          /* rows per tile */
#define NUM_THREADS 2
static const int UNROLL = 4;
// kforge: tune VEC_WIDTH in [1, 2, 4, 8]
#define VEC_WIDTH 4

static void blur_rows(const float *restrict in, float *restrict out, int rows, int cols) {
    #pragma omp parallel for num_threads(NUM_THREADS) schedule(static)
    for (int r0 = 0; r0 < rows; r0 += TILE) {
        int r1 = r0 + TILE < rows ? r0 + TILE : rows;
        for (int r = r0; r < r1; ++r) {
            int c = 1;
            for (; c + VEC_WIDTH * UNROLL < cols; c += VEC_WIDTH * UNROLL)
                for (int u = 0; u < VEC_WIDTH * UNROLL; ++u)
                    out[r * cols + c + u] = (in[r * cols + c + u - 1] + in[r * cols + c + u] + in[r * cols + c + u + 1]) / 3.0f;
            for (; c + 1 < cols; ++c)
                out[r * cols + c] = (in[r * cols + c - 1] + in[r * cols + c] + in[r * cols + c + 1]) / 3.0f;
        }
    }
}

int main(void) {
    const int rows = 300, cols = 517;
    float *in = malloc(sizeof(float) * rows * cols), *out = calloc((size_t)rows * cols, sizeof(float));
    for (int i = 0; i < rows * cols; ++i) in[i] = (float)((i * 7919) % 1009) / 1009.0f;
    blur_rows(in, out, rows, cols);
    double sum = 0;
    for (int i = 0; i < rows * cols; ++i) sum += out[i] * (1 + i % 13);
    printf("%.6f\n", sum);
    free(in);
    free(out);
    return 0;
}
