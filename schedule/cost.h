/* The cost model of plans (docs/DESIGN.md, schedule/ 1): per node FLOPs, bytes read + written and a time
 * estimate; per transfer bytes over the link bandwidth.
 *
 *   flops:  Conv, Gemm, MatMul: 2 * MACs; ConvGrad: 2 * forward MACs per present output (dX, dW;
 *           dB is a reduction of dY); every other op: the elements it touches (inputs + outputs).
 *   bytes:  sum of input bytes + output bytes (each tensor read or written once).
 *   time:   node_time[node] when calibrated (--calibrate), else the roofline
 *           max(flops / peak_flops, bytes / mem_bandwidth).
 *   transfer: link_latency + bytes / link_bandwidth.
 *   collective: plus comm_bytes / SC_COST_COMM_BANDWIDTH + SC_COST_COMM_LATENCY (AllReduce), with
 *           the roofline or the profile alike; it runs on the compute stream's time.
 */
#ifndef SC_COST_H
#define SC_COST_H

#include <stdint.h>

#include "graph/graph.h"

/* Effective (achieved, not datasheet) figures of the development machine: a 2-core Xeon VM with
 * AVX2/FMA. oneDNN convolutions and OpenBLAS GEMMs reach about 40 GFLOP/s on both cores together;
 * a STREAM-like copy reaches about 8 GB/s. They set the relative cost of ops, which is what the
 * strategies trade; absolute seconds come from calibration. */
#define SC_COST_CPU_PEAK_FLOPS 40e9
#define SC_COST_CPU_MEM_BANDWIDTH 8e9
/* Host <-> device link: the CPU backend's modelled "device" (a memcpy on a copy thread per direction), and a PCIe
 * 4/5 x16 GPU host link with pinned memory. */
#define SC_COST_LINK_CPU 12e9
#define SC_COST_LINK_GPU 50e9
/* What one transfer costs beyond its bytes, on either link: waking the CPU backend's copy thread and
 * signalling its completion, or a cudaMemcpyAsync's launch and the event the WAIT syncs on (both a
 * few microseconds). It is what makes streaming a 3 KiB bias cost more than keeping it resident. */
#define SC_COST_LINK_LATENCY 10e-6
/* Between data-parallel ranks (AllReduce's comm_bytes): MPI over shared memory between processes of
 * one host, and the latency of one collective (a few message rounds and the polling's sleeps). */
#define SC_COST_COMM_BANDWIDTH 4e9
#define SC_COST_COMM_LATENCY 50e-6

typedef struct {
    double peak_flops;       /* FLOP/s */
    double mem_bandwidth;    /* B/s */
    double link_bandwidth;   /* B/s host <-> device */
    double link_latency;     /* s per transfer beyond its bytes */
    const double *node_time; /* optional calibrated seconds per node id (not owned) */
} sc_cost_model;

/* A machine's measured throughput per op family, in place of the constants above (measured once per
 * machine and cached by train/cost_profile.c; Conv, ConvGrad, MatMul and Gemm nodes whose shape was
 * timed alone take that time instead, train/cost_shapes.c):
 *   Conv / ConvGrad:   flops / conv_flops, conv_grad_flops; with 1x1 kernels (a GEMM of lower
 *                      arithmetic intensity) conv1x1_flops, conv1x1_grad_flops
 *   MatMul, Gemm:      flops / gemm_flops
 *   normalisations:    bytes / norm_bandwidth (BatchNormalization, LayerNormalization, Softmax,
 *                      LogSoftmax: several passes over their bytes), their gradients bytes /
 *                      norm_grad_bandwidth
 *   pools and grads:   flops (the window work) / pool_rate
 *   views:             nothing beyond the overhead (Reshape, Flatten, Squeeze, Unsqueeze, Identity:
 *                      their output is their input's storage, sc_op_is_view)
 *   every other op:    max(flops / elem_rate, bytes / mem_bandwidth)  (flops: the elements it touches)
 * plus node_overhead per node (the kernel call). All 0: not measured. */
typedef struct {
    double conv_flops, conv_grad_flops, conv1x1_flops, conv1x1_grad_flops, gemm_flops; /* FLOP/s */
    double norm_bandwidth, norm_grad_bandwidth;                                         /* B/s */
    double pool_rate;                                                                   /* window elements/s */
    double elem_rate;                                                                   /* elements touched/s */
    double mem_bandwidth;                                                               /* B/s */
    double node_overhead;                                                               /* s */
} sc_cost_profile;

/* node_time[i] for every node of g under profile p (the per-node array sc_plan_options.node_time
 * takes, as calibration does). */
void cost_profile_node_times(const sc_cost_profile *p, const sc_graph *g, double *node_time);

/* CPU constants; link_bandwidth 0 = SC_COST_LINK_CPU; node_time may be NULL. */
void cost_model_default(sc_cost_model *m, double link_bandwidth, const double *node_time);

double cost_node_flops(const sc_graph *g, int node);
int64_t cost_node_bytes(const sc_graph *g, int node);
double cost_node_time(const sc_cost_model *m, const sc_graph *g, int node);
double cost_transfer_time(const sc_cost_model *m, int64_t bytes);
/* Seconds a node spends exchanging data with the other ranks (0 for every op but the collectives). */
double cost_node_comm_time(const sc_graph *g, int node);
/* The ranks' interconnect as measured by the job (train/train_dist.c), in place of
 * SC_COST_COMM_BANDWIDTH and SC_COST_COMM_LATENCY for every plan made from now on in this process;
 * values <= 0 restore the constants. Every rank sets the same figures, so their plans agree. */
void cost_set_comm_link(double bytes_per_second, double latency_seconds);

#endif
