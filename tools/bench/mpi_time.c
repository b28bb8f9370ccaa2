/* PMPI timing shim for tools/bench/ep-bench.sh (MPI's standard profiling
 * interface): LD_PRELOADed into every rank, it times the MPI calls the
 * expert-parallel code makes (MPI_Send, MPI_Recv, MPI_Allreduce) and, at
 * MPI_Finalize, prints "mpi-seconds RANK SECONDS CALLS" on stderr. */
#include <mpi.h>
#include <stdio.h>

static double total;
static long calls;

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag,
             MPI_Comm comm) {
  double t = PMPI_Wtime();
  int rc = PMPI_Send(buf, count, type, dest, tag, comm);
  total += PMPI_Wtime() - t;
  ++calls;
  return rc;
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag,
             MPI_Comm comm, MPI_Status *status) {
  double t = PMPI_Wtime();
  int rc = PMPI_Recv(buf, count, type, source, tag, comm, status);
  total += PMPI_Wtime() - t;
  ++calls;
  return rc;
}

int MPI_Allreduce(const void *in, void *out, int count, MPI_Datatype type,
                  MPI_Op op, MPI_Comm comm) {
  double t = PMPI_Wtime();
  int rc = PMPI_Allreduce(in, out, count, type, op, comm);
  total += PMPI_Wtime() - t;
  ++calls;
  return rc;
}

int MPI_Finalize(void) {
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "mpi-seconds %d %.6f %ld\n", rank, total, calls);
  return PMPI_Finalize();
}
