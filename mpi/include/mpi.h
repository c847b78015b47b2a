/* The MPI C binding over cartage, with the MPICH ABI: integer handles and
 * the constant values and MPI_Status layout of MPICH 4.0's mpi.h, so that a
 * program built against MPICH (libmpich.so.12) runs on cartage with nothing
 * but LD_LIBRARY_PATH. tests/mpi_abi_test.sh checks every value defined here
 * against MPICH's own header.
 *
 * What is here is what the library provides; a function it does not
 * provide is not declared, and a program that calls one fails to link.
 * Status arrays are declared as pointers, not arrays (the same type in C),
 * so that g++ 12 does not read MPI_STATUSES_IGNORE as an array of none. */
#ifndef CARTAGE_MPI_H_
#define CARTAGE_MPI_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Handles: integers, as MPICH's. */
typedef int MPI_Comm;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Request;
typedef int MPI_Errhandler;
typedef int MPI_Group;
typedef int MPI_Info;
typedef int MPI_Message;
typedef int MPI_Win;
typedef int MPI_Session;
typedef long MPI_Aint;
typedef long MPI_Count;
typedef long MPI_Offset;
typedef int MPI_Fint;

typedef void(MPI_User_function)(void* invec, void* inoutvec, int* len, MPI_Datatype* datatype);
typedef void(MPI_Comm_errhandler_function)(MPI_Comm*, int*, ...);
typedef int(MPI_Copy_function)(MPI_Comm, int, void*, void*, void*, int*);
typedef int(MPI_Delete_function)(MPI_Comm, int, void*, void*);
typedef int(MPI_Comm_copy_attr_function)(MPI_Comm, int, void*, void*, void*, int*);
typedef int(MPI_Comm_delete_attr_function)(MPI_Comm, int, void*, void*);
typedef int(MPI_Type_copy_attr_function)(MPI_Datatype, int, void*, void*, void*, int*);
typedef int(MPI_Type_delete_attr_function)(MPI_Datatype, int, void*, void*);

typedef struct MPI_Status {
  int count_lo;
  int count_hi_and_cancelled;
  int MPI_SOURCE;
  int MPI_TAG;
  int MPI_ERROR;
} MPI_Status;
typedef int(MPI_Grequest_cancel_function)(void*, int);
typedef int(MPI_Grequest_free_function)(void*);
typedef int(MPI_Grequest_query_function)(void*, MPI_Status*);

#define MPI_VERSION 4
#define MPI_SUBVERSION 0

/* Null handles. */
#define MPI_COMM_NULL ((MPI_Comm)0x04000000)
#define MPI_OP_NULL ((MPI_Op)0x18000000)
#define MPI_GROUP_NULL ((MPI_Group)0x08000000)
#define MPI_DATATYPE_NULL ((MPI_Datatype)0x0c000000)
#define MPI_REQUEST_NULL ((MPI_Request)0x2c000000)
#define MPI_ERRHANDLER_NULL ((MPI_Errhandler)0x14000000)
#define MPI_MESSAGE_NULL ((MPI_Message)0x2c000000)
#define MPI_INFO_NULL ((MPI_Info)0x1c000000)
#define MPI_WIN_NULL ((MPI_Win)0x20000000)
#define MPI_SESSION_NULL ((MPI_Session)0x38000000)

/* Communicators. */
#define MPI_COMM_WORLD ((MPI_Comm)0x44000000)
#define MPI_COMM_SELF ((MPI_Comm)0x44000001)
#define MPI_GROUP_EMPTY ((MPI_Group)0x48000000)
#define MPI_INFO_ENV ((MPI_Info)0x5c000001)
#define MPI_MAX_OBJECT_NAME 128
#define MPI_MAX_INFO_KEY 255
#define MPI_MAX_INFO_VAL 1024
#define MPI_IDENT 0
#define MPI_CONGRUENT 1
#define MPI_SIMILAR 2
#define MPI_UNEQUAL 3

/* Predefined datatypes (the C ones, and the fixed-width integers). */
#define MPI_CHAR ((MPI_Datatype)0x4c000101)
#define MPI_SIGNED_CHAR ((MPI_Datatype)0x4c000118)
#define MPI_UNSIGNED_CHAR ((MPI_Datatype)0x4c000102)
#define MPI_BYTE ((MPI_Datatype)0x4c00010d)
#define MPI_PACKED ((MPI_Datatype)0x4c00010f)
#define MPI_WCHAR ((MPI_Datatype)0x4c00040e)
#define MPI_SHORT ((MPI_Datatype)0x4c000203)
#define MPI_UNSIGNED_SHORT ((MPI_Datatype)0x4c000204)
#define MPI_INT ((MPI_Datatype)0x4c000405)
#define MPI_UNSIGNED ((MPI_Datatype)0x4c000406)
#define MPI_LONG ((MPI_Datatype)0x4c000807)
#define MPI_UNSIGNED_LONG ((MPI_Datatype)0x4c000808)
#define MPI_LONG_LONG_INT ((MPI_Datatype)0x4c000809)
#define MPI_LONG_LONG MPI_LONG_LONG_INT
#define MPI_UNSIGNED_LONG_LONG ((MPI_Datatype)0x4c000819)
#define MPI_FLOAT ((MPI_Datatype)0x4c00040a)
#define MPI_DOUBLE ((MPI_Datatype)0x4c00080b)
#define MPI_LONG_DOUBLE ((MPI_Datatype)0x4c00100c)
#define MPI_INT8_T ((MPI_Datatype)0x4c000137)
#define MPI_INT16_T ((MPI_Datatype)0x4c000238)
#define MPI_INT32_T ((MPI_Datatype)0x4c000439)
#define MPI_INT64_T ((MPI_Datatype)0x4c00083a)
#define MPI_UINT8_T ((MPI_Datatype)0x4c00013b)
#define MPI_UINT16_T ((MPI_Datatype)0x4c00023c)
#define MPI_UINT32_T ((MPI_Datatype)0x4c00043d)
#define MPI_UINT64_T ((MPI_Datatype)0x4c00083e)
#define MPI_C_BOOL ((MPI_Datatype)0x4c00013f)
#define MPI_C_FLOAT_COMPLEX ((MPI_Datatype)0x4c000840)
#define MPI_C_COMPLEX MPI_C_FLOAT_COMPLEX
#define MPI_C_DOUBLE_COMPLEX ((MPI_Datatype)0x4c001041)
#define MPI_C_LONG_DOUBLE_COMPLEX ((MPI_Datatype)0x4c002042)
#define MPI_AINT ((MPI_Datatype)0x4c000843)
#define MPI_OFFSET ((MPI_Datatype)0x4c000844)
#define MPI_COUNT ((MPI_Datatype)0x4c000845)
/* Fortran's and C++'s predefined datatypes, each the same layout as a C type. */
#define MPI_CHARACTER ((MPI_Datatype)0x4c00011a)
#define MPI_INTEGER ((MPI_Datatype)0x4c00041b)
#define MPI_REAL ((MPI_Datatype)0x4c00041c)
#define MPI_LOGICAL ((MPI_Datatype)0x4c00041d)
#define MPI_COMPLEX ((MPI_Datatype)0x4c00081e)
#define MPI_DOUBLE_PRECISION ((MPI_Datatype)0x4c00081f)
#define MPI_2INTEGER ((MPI_Datatype)0x4c000820)
#define MPI_DOUBLE_COMPLEX ((MPI_Datatype)0x4c001022)
#define MPI_REAL4 ((MPI_Datatype)0x4c000427)
#define MPI_COMPLEX8 ((MPI_Datatype)0x4c000828)
/* Fortran's quad precision (moved as bytes: no C type here), and MPI-1's bound markers. */
#define MPI_REAL16 ((MPI_Datatype)0x4c00102b)
#define MPI_COMPLEX32 ((MPI_Datatype)0x4c00202c)
#define MPI_INTEGER16 ((MPI_Datatype)MPI_DATATYPE_NULL) /* as MPICH: an optional type this platform lacks */
#define MPI_LB ((MPI_Datatype)0x4c000010)
#define MPI_UB ((MPI_Datatype)0x4c000011)
#define MPI_REAL8 ((MPI_Datatype)0x4c000829)
#define MPI_COMPLEX16 ((MPI_Datatype)0x4c00102a)
#define MPI_INTEGER1 ((MPI_Datatype)0x4c00012d)
#define MPI_INTEGER2 ((MPI_Datatype)0x4c00022f)
#define MPI_INTEGER4 ((MPI_Datatype)0x4c000430)
#define MPI_INTEGER8 ((MPI_Datatype)0x4c000831)
#define MPI_CXX_BOOL ((MPI_Datatype)0x4c000133)
#define MPI_CXX_FLOAT_COMPLEX ((MPI_Datatype)0x4c000834)
#define MPI_CXX_DOUBLE_COMPLEX ((MPI_Datatype)0x4c001035)
#define MPI_CXX_LONG_DOUBLE_COMPLEX ((MPI_Datatype)0x4c002036)
/* The value-index pairs of MINLOC and MAXLOC. */
#define MPI_FLOAT_INT ((MPI_Datatype)0x8c000000)
#define MPI_DOUBLE_INT ((MPI_Datatype)0x8c000001)
#define MPI_LONG_INT ((MPI_Datatype)0x8c000002)
#define MPI_SHORT_INT ((MPI_Datatype)0x8c000003)
#define MPI_2INT ((MPI_Datatype)0x4c000816)
#define MPI_LONG_DOUBLE_INT ((MPI_Datatype)0x8c000004)

/* What MPI_Type_get_envelope says made a type. */
#define MPI_COMBINER_NAMED 1
#define MPI_COMBINER_DUP 2
#define MPI_COMBINER_CONTIGUOUS 3
#define MPI_COMBINER_VECTOR 4
#define MPI_COMBINER_HVECTOR 6
#define MPI_COMBINER_INDEXED 7
#define MPI_COMBINER_HINDEXED 9
#define MPI_COMBINER_INDEXED_BLOCK 10
#define MPI_COMBINER_STRUCT 12
#define MPI_COMBINER_SUBARRAY 13
#define MPI_COMBINER_DARRAY 14
#define MPI_COMBINER_RESIZED 18
#define MPI_COMBINER_HINDEXED_BLOCK 19
#define MPI_ORDER_C 56
#define MPI_ORDER_FORTRAN 57
/* MPI_Type_create_darray's distributions, and MPI_Type_match_size's classes. */
#define MPI_DISTRIBUTE_BLOCK 121
#define MPI_DISTRIBUTE_CYCLIC 122
#define MPI_DISTRIBUTE_NONE 123
#define MPI_DISTRIBUTE_DFLT_DARG -49767
#define MPI_TYPECLASS_REAL 1
#define MPI_TYPECLASS_INTEGER 2
#define MPI_TYPECLASS_COMPLEX 3

/* Reduction operators. */
#define MPI_MAX (MPI_Op)(0x58000001)
#define MPI_MIN (MPI_Op)(0x58000002)
#define MPI_SUM (MPI_Op)(0x58000003)
#define MPI_PROD (MPI_Op)(0x58000004)
#define MPI_LAND (MPI_Op)(0x58000005)
#define MPI_BAND (MPI_Op)(0x58000006)
#define MPI_LOR (MPI_Op)(0x58000007)
#define MPI_BOR (MPI_Op)(0x58000008)
#define MPI_LXOR (MPI_Op)(0x58000009)
#define MPI_BXOR (MPI_Op)(0x5800000a)
#define MPI_MINLOC (MPI_Op)(0x5800000b)
#define MPI_MAXLOC (MPI_Op)(0x5800000c)

/* Error handlers. */
#define MPI_ERRORS_ARE_FATAL ((MPI_Errhandler)0x54000000)
#define MPI_ERRORS_RETURN ((MPI_Errhandler)0x54000001)
#define MPI_ERRORS_ABORT ((MPI_Errhandler)0x54000003)

/* The predefined attributes of MPI_COMM_WORLD (MPI_Comm_get_attr). */
#define MPI_TAG_UB 0x64400001
#define MPI_HOST 0x64400003
#define MPI_IO 0x64400005
#define MPI_WTIME_IS_GLOBAL 0x64400007
#define MPI_UNIVERSE_SIZE 0x64400009
#define MPI_LASTUSEDCODE 0x6440000b
#define MPI_APPNUM 0x6440000d

/* What MPI_Topo_test says of a communicator (MPICH's values). */
#define MPI_GRAPH 1
#define MPI_CART 2
#define MPI_DIST_GRAPH 3

/* Special ranks, tags and addresses. */
#define MPI_PROC_NULL (-1)
#define MPI_ANY_SOURCE (-2)
#define MPI_ROOT (-3)
#define MPI_ANY_TAG (-1)
#define MPI_UNDEFINED (-32766)
#define MPI_BOTTOM (void*)0
#define MPI_IN_PLACE (void*)-1
#define MPI_STATUS_IGNORE (MPI_Status*)1
#define MPI_STATUSES_IGNORE (MPI_Status*)1

#define MPI_MAX_PROCESSOR_NAME 128
#define MPI_MAX_LIBRARY_VERSION_STRING 8192
#define MPI_MAX_ERROR_STRING 512

#define MPI_THREAD_SINGLE 0
#define MPI_THREAD_FUNNELED 1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE 3

/* Error classes. */
#define MPI_SUCCESS 0
#define MPI_ERR_BUFFER 1
#define MPI_ERR_COUNT 2
#define MPI_ERR_TYPE 3
#define MPI_ERR_TAG 4
#define MPI_ERR_COMM 5
#define MPI_ERR_RANK 6
#define MPI_ERR_ROOT 7
#define MPI_ERR_GROUP 8
#define MPI_ERR_OP 9
#define MPI_ERR_TOPOLOGY 10
#define MPI_ERR_DIMS 11
#define MPI_ERR_ARG 12
#define MPI_ERR_UNKNOWN 13
#define MPI_ERR_TRUNCATE 14
#define MPI_ERR_OTHER 15
#define MPI_ERR_INTERN 16
#define MPI_ERR_IN_STATUS 17
#define MPI_ERR_PENDING 18
#define MPI_ERR_REQUEST 19
#define MPI_ERR_INFO 28
#define MPI_ERR_INFO_KEY 29
#define MPI_ERR_INFO_VALUE 30
#define MPI_ERR_INFO_NOKEY 31
#define MPI_ERR_NO_MEM 34
#define MPI_ERR_KEYVAL 48
#define MPI_ERR_LASTCODE 0x3fffffff

/* Set-up and tear-down. */
int MPI_Init(int* argc, char*** argv);
int MPI_Init_thread(int* argc, char*** argv, int required, int* provided);
int MPI_Finalize(void);
int MPI_Initialized(int* flag);
int MPI_Finalized(int* flag);
int MPI_Query_thread(int* provided);
int MPI_Abort(MPI_Comm comm, int errorcode);
int MPI_Get_processor_name(char* name, int* resultlen);
int MPI_Get_version(int* version, int* subversion);
int MPI_Get_library_version(char* version, int* resultlen);
double MPI_Wtime(void);
double MPI_Wtick(void);

/* Communicators. */
int MPI_Comm_rank(MPI_Comm comm, int* rank);
int MPI_Comm_size(MPI_Comm comm, int* size);
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm);
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm);
int MPI_Comm_free(MPI_Comm* comm);
int MPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void* attribute_val, int* flag);

/* Errors. */
int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler);
int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler* errhandler);
int MPI_Error_class(int errorcode, int* errorclass);
int MPI_Error_string(int errorcode, char* string, int* resultlen);

/* Point-to-point. */
int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Ssend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status* status);
int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status* status);
int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source,
                         int recvtag, MPI_Comm comm, MPI_Status* status);
int MPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request* request);
int MPI_Issend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request);
int MPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
              MPI_Request* request);
int MPI_Wait(MPI_Request* request, MPI_Status* status);
int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status);
int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status* array_of_statuses);
int MPI_Waitany(int count, MPI_Request array_of_requests[], int* index, MPI_Status* status);
int MPI_Testall(int count, MPI_Request array_of_requests[], int* flag, MPI_Status* array_of_statuses);
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status);
int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status);
int MPI_Send_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                  MPI_Request* request);
int MPI_Recv_init(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                  MPI_Request* request);
int MPI_Start(MPI_Request* request);
int MPI_Startall(int count, MPI_Request array_of_requests[]);
int MPI_Request_free(MPI_Request* request);
int MPI_Cancel(MPI_Request* request);
int MPI_Test_cancelled(const MPI_Status* status, int* flag);
int MPI_Get_count(const MPI_Status* status, MPI_Datatype datatype, int* count);
int MPI_Type_size(MPI_Datatype datatype, int* size);

/* Derived datatypes (MPI_Type_size and MPI_Get_count take them too). */
int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                            MPI_Datatype* newtype);
int MPI_Type_indexed(int count, const int array_of_blocklengths[], const int array_of_displacements[],
                     MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_create_hindexed(int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[],
                             MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_create_indexed_block(int count, int blocklength, const int array_of_displacements[],
                                  MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_create_struct(int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[],
                           const MPI_Datatype array_of_types[], MPI_Datatype* newtype);
int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent, MPI_Datatype* newtype);
int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_commit(MPI_Datatype* datatype);
int MPI_Type_free(MPI_Datatype* datatype);
int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint* lb, MPI_Aint* extent);
int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint* true_lb, MPI_Aint* true_extent);

/* Collectives. */
int MPI_Barrier(MPI_Comm comm);
int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm);
int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request);
int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request* request);
int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request* request);
int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request);
int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                  void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                  MPI_Comm comm);

/* Groups, and communicators made from them; intercommunicators. */
int MPI_Comm_group(MPI_Comm comm, MPI_Group* group);
int MPI_Comm_remote_group(MPI_Comm comm, MPI_Group* group);
int MPI_Group_size(MPI_Group group, int* size);
int MPI_Group_rank(MPI_Group group, int* rank);
int MPI_Group_free(MPI_Group* group);
int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup);
int MPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup);
int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup);
int MPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup);
int MPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup);
int MPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup);
int MPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup);
int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2, int ranks2[]);
int MPI_Group_compare(MPI_Group group1, MPI_Group group2, int* result);
int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm);
int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm);
int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int* result);
int MPI_Comm_test_inter(MPI_Comm comm, int* flag);
int MPI_Comm_remote_size(MPI_Comm comm, int* size);
int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader, int tag,
                         MPI_Comm* newintercomm);
int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm* newintracomm);
int MPI_Comm_set_name(MPI_Comm comm, const char* comm_name);
int MPI_Comm_get_name(MPI_Comm comm, char* comm_name, int* resultlen);

/* Info objects. */
int MPI_Info_create(MPI_Info* info);
int MPI_Info_free(MPI_Info* info);
int MPI_Info_set(MPI_Info info, const char* key, const char* value);
int MPI_Info_get(MPI_Info info, const char* key, int valuelen, char* value, int* flag);
int MPI_Info_get_string(MPI_Info info, const char* key, int* buflen, char* value, int* flag);
int MPI_Info_get_valuelen(MPI_Info info, const char* key, int* valuelen, int* flag);
int MPI_Info_get_nkeys(MPI_Info info, int* nkeys);
int MPI_Info_get_nthkey(MPI_Info info, int n, char* key);
int MPI_Info_delete(MPI_Info info, const char* key);
int MPI_Info_dup(MPI_Info info, MPI_Info* newinfo);

/* More about datatypes, and memory. */
int MPI_Get_address(const void* location, MPI_Aint* address);
int MPI_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_hindexed(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[],
                      MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint array_of_displacements[],
                                   MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_create_subarray(int ndims, const int array_of_sizes[], const int array_of_subsizes[],
                             const int array_of_starts[], int order, MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_get_envelope(MPI_Datatype datatype, int* num_integers, int* num_addresses, int* num_datatypes,
                          int* combiner);
int MPI_Type_set_name(MPI_Datatype datatype, const char* type_name);
int MPI_Type_get_name(MPI_Datatype datatype, char* type_name, int* resultlen);
int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr);
int MPI_Free_mem(void* base);

/* More collectives: reduce-scatter, the other nonblocking forms, the
 * persistent ones (MPI-4), and the program's own reduction operators. */
int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm);
int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm);
int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
              MPI_Request* request);
int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                MPI_Request* request);
int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm, MPI_Request* request);
int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request* request);
int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request);
int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request);
int MPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                 const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request);
int MPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                  void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request);
int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                    MPI_Request* request);
int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request* request);
int MPI_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request* request);
int MPI_Bcast_init(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info,
                   MPI_Request* request);
int MPI_Reduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                    MPI_Comm comm, MPI_Info info, MPI_Request* request);
int MPI_Allreduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm, MPI_Info info, MPI_Request* request);
int MPI_Scan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                  MPI_Info info, MPI_Request* request);
int MPI_Exscan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                    MPI_Info info, MPI_Request* request);
int MPI_Reduce_scatter_block_init(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype,
                                  MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int MPI_Reduce_scatter_init(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype,
                            MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int MPI_Gather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                    MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int MPI_Scatter_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                     MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int MPI_Allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                       MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int MPI_Alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                      MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int MPI_Gatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                     const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                     MPI_Request* request);
int MPI_Scatterv_init(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                      void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                      MPI_Request* request);
int MPI_Allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                        const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                        MPI_Info info, MPI_Request* request);
int MPI_Alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                       void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                       MPI_Comm comm, MPI_Info info, MPI_Request* request);
int MPI_Op_create(MPI_User_function* user_fn, int commute, MPI_Op* op);
int MPI_Op_free(MPI_Op* op);
int MPI_Op_commutative(MPI_Op op, int* commute);
int MPI_Reduce_local(const void* inbuf, void* inoutbuf, int count, MPI_Datatype datatype, MPI_Op op);

/* Buffered and ready sends, more of the Wait and Test family, packing. */
#define MPI_BSEND_OVERHEAD 96
int MPI_Buffer_attach(void* buffer, int size);
int MPI_Buffer_detach(void* buffer_addr, int* size);
int MPI_Bsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Ibsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request);
int MPI_Rsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Irsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request);
int MPI_Rsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request);
int MPI_Testany(int count, MPI_Request array_of_requests[], int* indx, int* flag, MPI_Status* status);
int MPI_Testsome(int incount, MPI_Request array_of_requests[], int* outcount, int array_of_indices[],
                 MPI_Status* array_of_statuses);
int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int* outcount, int array_of_indices[],
                 MPI_Status* array_of_statuses);
int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status);
int MPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int* size);
int MPI_Pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf, int outsize, int* position,
             MPI_Comm comm);
int MPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount, MPI_Datatype datatype,
               MPI_Comm comm);
int MPI_Get_elements(const MPI_Status* status, MPI_Datatype datatype, int* count);
int MPI_Status_set_elements(MPI_Status* status, MPI_Datatype datatype, int count);
int MPI_Status_set_cancelled(MPI_Status* status, int flag);

/* Attributes: keyvals the program makes and the values it sets under them.
 * MPI_DUP_FN is MPICH's MPIR_Dup_fn, which the library provides. */
#define MPI_KEYVAL_INVALID 0x24000000
#define MPI_NULL_COPY_FN ((MPI_Copy_function*)0)
#define MPI_NULL_DELETE_FN ((MPI_Delete_function*)0)
#define MPI_DUP_FN MPIR_Dup_fn
#define MPI_COMM_NULL_COPY_FN ((MPI_Comm_copy_attr_function*)0)
#define MPI_COMM_NULL_DELETE_FN ((MPI_Comm_delete_attr_function*)0)
#define MPI_COMM_DUP_FN ((MPI_Comm_copy_attr_function*)MPI_DUP_FN)
#define MPI_TYPE_NULL_COPY_FN ((MPI_Type_copy_attr_function*)0)
#define MPI_TYPE_NULL_DELETE_FN ((MPI_Type_delete_attr_function*)0)
#define MPI_TYPE_DUP_FN ((MPI_Type_copy_attr_function*)MPI_DUP_FN)
int MPIR_Dup_fn(MPI_Comm oldcomm, int keyval, void* extra_state, void* attribute_val_in, void* attribute_val_out,
                int* flag);
int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function* comm_copy_attr_fn,
                           MPI_Comm_delete_attr_function* comm_delete_attr_fn, int* comm_keyval, void* extra_state);
int MPI_Comm_free_keyval(int* comm_keyval);
int MPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void* attribute_val);
int MPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval);
int MPI_Keyval_create(MPI_Copy_function* copy_fn, MPI_Delete_function* delete_fn, int* keyval, void* extra_state);
int MPI_Keyval_free(int* keyval);
int MPI_Attr_put(MPI_Comm comm, int keyval, void* attribute_val);
int MPI_Attr_get(MPI_Comm comm, int keyval, void* attribute_val, int* flag);
int MPI_Attr_delete(MPI_Comm comm, int keyval);
int MPI_Type_create_keyval(MPI_Type_copy_attr_function* type_copy_attr_fn,
                           MPI_Type_delete_attr_function* type_delete_attr_fn, int* type_keyval, void* extra_state);
int MPI_Type_free_keyval(int* type_keyval);
int MPI_Type_set_attr(MPI_Datatype datatype, int type_keyval, void* attribute_val);
int MPI_Type_get_attr(MPI_Datatype datatype, int type_keyval, void* attribute_val, int* flag);
int MPI_Type_delete_attr(MPI_Datatype datatype, int type_keyval);

/* Error handlers the program makes, and error classes, codes and texts it adds. */
int MPI_Comm_create_errhandler(MPI_Comm_errhandler_function* comm_errhandler_fn, MPI_Errhandler* errhandler);
int MPI_Errhandler_free(MPI_Errhandler* errhandler);
int MPI_Comm_call_errhandler(MPI_Comm comm, int errorcode);
int MPI_Add_error_class(int* errorclass);
int MPI_Add_error_code(int errorclass, int* errorcode);
int MPI_Add_error_string(int errorcode, const char* string);

/* Threads, the environment, and communicators by what ranks share. */
#define MPI_COMM_TYPE_SHARED 1
int MPI_Is_thread_main(int* flag);
int MPI_Info_create_env(int argc, char* argv[], MPI_Info* info);
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm);

/* Matched probes. */
#define MPI_MESSAGE_NO_PROC ((MPI_Message)0x6c000000)
int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message, MPI_Status* status);
int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status);
int MPI_Mrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message, MPI_Status* status);
int MPI_Imrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message, MPI_Request* request);

/* Handles to and from Fortran's integers: the same values, as MPICH's. */
#define MPI_Comm_c2f(comm) (MPI_Fint)(comm)
#define MPI_Comm_f2c(comm) (MPI_Comm)(comm)
#define MPI_Type_c2f(datatype) (MPI_Fint)(datatype)
#define MPI_Type_f2c(datatype) (MPI_Datatype)(datatype)
#define MPI_Group_c2f(group) (MPI_Fint)(group)
#define MPI_Group_f2c(group) (MPI_Group)(group)
#define MPI_Info_c2f(info) (MPI_Fint)(info)
#define MPI_Info_f2c(info) (MPI_Info)(info)
#define MPI_Request_c2f(request) (MPI_Fint)(request)
#define MPI_Request_f2c(request) (MPI_Request)(request)
#define MPI_Op_c2f(op) (MPI_Fint)(op)
#define MPI_Op_f2c(op) (MPI_Op)(op)
#define MPI_Errhandler_c2f(errhandler) (MPI_Fint)(errhandler)
#define MPI_Errhandler_f2c(errhandler) (MPI_Errhandler)(errhandler)
#define MPI_Message_c2f(msg) ((MPI_Fint)(msg))
#define MPI_Message_f2c(msg) ((MPI_Message)(msg))
#define PMPI_Comm_c2f(comm) (MPI_Fint)(comm)
#define PMPI_Comm_f2c(comm) (MPI_Comm)(comm)
#define PMPI_Type_c2f(datatype) (MPI_Fint)(datatype)
#define PMPI_Type_f2c(datatype) (MPI_Datatype)(datatype)
#define PMPI_Group_c2f(group) (MPI_Fint)(group)
#define PMPI_Group_f2c(group) (MPI_Group)(group)
#define PMPI_Info_c2f(info) (MPI_Fint)(info)
#define PMPI_Info_f2c(info) (MPI_Info)(info)
#define PMPI_Request_c2f(request) (MPI_Fint)(request)
#define PMPI_Request_f2c(request) (MPI_Request)(request)
#define PMPI_Op_c2f(op) (MPI_Fint)(op)
#define PMPI_Op_f2c(op) (MPI_Op)(op)
#define PMPI_Errhandler_c2f(errhandler) (MPI_Fint)(errhandler)
#define PMPI_Errhandler_f2c(errhandler) (MPI_Errhandler)(errhandler)
#define PMPI_Message_c2f(msg) ((MPI_Fint)(msg))
#define PMPI_Message_f2c(msg) ((MPI_Message)(msg))

/* Communicators' hints (cartage takes none). */
int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info);
int MPI_Comm_get_info(MPI_Comm comm, MPI_Info* info_used);
int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm);

/* Alltoall with a datatype for each rank's block, at displacements in bytes. */
int MPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                  void* recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                  MPI_Comm comm);
int MPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                   void* recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                   MPI_Comm comm, MPI_Request* request);
int MPI_Alltoallw_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                       const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[], const int rdispls[],
                       const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info, MPI_Request* request);

/* Duplicating a communicator without waiting: newcomm is set when the request completes. */
int MPI_Comm_idup(MPI_Comm comm, MPI_Comm* newcomm, MPI_Request* request);
int MPI_Comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm, MPI_Request* request);

/* Cartesian topologies, and the neighbourhood collectives on them. */
int MPI_Dims_create(int nnodes, int ndims, int dims[]);
int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm* comm_cart);
int MPI_Cart_map(MPI_Comm comm, int ndims, const int dims[], const int periods[], int* newrank);
int MPI_Topo_test(MPI_Comm comm, int* status);
int MPI_Cartdim_get(MPI_Comm comm, int* ndims);
int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]);
int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]);
int MPI_Cart_rank(MPI_Comm comm, const int coords[], int* rank);
int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int* rank_source, int* rank_dest);
int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm);
int MPI_Neighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                          MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Ineighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                           MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int MPI_Neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                           MPI_Datatype recvtype, MPI_Comm comm);
int MPI_Ineighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                            int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);

/* An intercommunicator from two groups of the world (MPI-4), its meeting named by a string. */
int MPI_Intercomm_create_from_groups(MPI_Group local_group, int local_leader, MPI_Group remote_group,
                                     int remote_leader, const char* stringtag, MPI_Info info,
                                     MPI_Errhandler errhandler, MPI_Comm* newintercomm);

/* Point-to-point: MPI-4's nonblocking sendrecv, the other persistent modes, generalized requests, large counts. */
int MPI_Isendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Request* request);
int MPI_Isendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source, int recvtag,
                          MPI_Comm comm, MPI_Request* request);
int MPI_Bsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request);
int MPI_Ssend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request);
int MPI_Grequest_start(MPI_Grequest_query_function* query_fn, MPI_Grequest_free_function* free_fn,
                       MPI_Grequest_cancel_function* cancel_fn, void* extra_state, MPI_Request* request);
int MPI_Grequest_complete(MPI_Request request);
int MPI_Send_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int MPI_Recv_c(void* buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
               MPI_Status* status);
int MPI_Isend_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                MPI_Request* request);
int MPI_Irecv_c(void* buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                MPI_Request* request);
int MPI_Get_count_c(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count);
int MPI_Get_elements_c(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count);
int MPI_Get_elements_x(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count);
int MPI_Status_set_elements_x(MPI_Status* status, MPI_Datatype datatype, MPI_Count count);

/* Error handlers under MPI-1's names, and MPICH's removal of added error classes, codes and strings. */
int MPI_Errhandler_create(MPI_Comm_errhandler_function* comm_errhandler_fn, MPI_Errhandler* errhandler);
int MPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler);
int MPI_Errhandler_get(MPI_Comm comm, MPI_Errhandler* errhandler);
int MPIX_Delete_error_class(int errorclass);
int MPIX_Delete_error_code(int errorcode);
int MPIX_Delete_error_string(int errorcode);

/* Datatypes: contents, distributed arrays, matching sizes, external32, large counts, and MPI-1's names. */
int MPI_Type_get_contents(MPI_Datatype datatype, int max_integers, int max_addresses, int max_datatypes,
                          int array_of_integers[], MPI_Aint array_of_addresses[], MPI_Datatype array_of_datatypes[]);
int MPI_Type_create_darray(int size, int rank, int ndims, const int array_of_gsizes[], const int array_of_distribs[],
                           const int array_of_dargs[], const int array_of_psizes[], int order, MPI_Datatype oldtype,
                           MPI_Datatype* newtype);
int MPI_Type_match_size(int typeclass, int size, MPI_Datatype* datatype);
int MPI_Pack_external(const char datarep[], const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf,
                      MPI_Aint outsize, MPI_Aint* position);
int MPI_Pack_external_size(const char datarep[], int incount, MPI_Datatype datatype, MPI_Aint* size);
int MPI_Unpack_external(const char datarep[], const void* inbuf, MPI_Aint insize, MPI_Aint* position, void* outbuf,
                        int outcount, MPI_Datatype datatype);
int MPI_Type_contiguous_c(MPI_Count count, MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_vector_c(MPI_Count count, MPI_Count blocklength, MPI_Count stride, MPI_Datatype oldtype,
                      MPI_Datatype* newtype);
int MPI_Type_create_hindexed_c(MPI_Count count, const MPI_Count array_of_blocklengths[],
                               const MPI_Count array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_create_indexed_block_c(MPI_Count count, MPI_Count blocklength, const MPI_Count array_of_displacements[],
                                    MPI_Datatype oldtype, MPI_Datatype* newtype);
int MPI_Type_size_c(MPI_Datatype datatype, MPI_Count* size);
int MPI_Type_size_x(MPI_Datatype datatype, MPI_Count* size);
int MPI_Type_get_extent_c(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent);
int MPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent);
int MPI_Type_get_true_extent_c(MPI_Datatype datatype, MPI_Count* true_lb, MPI_Count* true_extent);
int MPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count* true_lb, MPI_Count* true_extent);
int MPI_Type_struct(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[],
                    MPI_Datatype array_of_types[], MPI_Datatype* newtype);
int MPI_Address(void* location, MPI_Aint* address);
int MPI_Type_extent(MPI_Datatype datatype, MPI_Aint* extent);
int MPI_Type_lb(MPI_Datatype datatype, MPI_Aint* displacement);
int MPI_Type_ub(MPI_Datatype datatype, MPI_Aint* displacement);

/* Sessions (MPI-4): process sets, and communicators made from their groups. */
int MPI_Session_init(MPI_Info info, MPI_Errhandler errhandler, MPI_Session* session);
int MPI_Session_finalize(MPI_Session* session);
int MPI_Session_get_info(MPI_Session session, MPI_Info* info_used);
int MPI_Session_get_num_psets(MPI_Session session, MPI_Info info, int* npset_names);
int MPI_Session_get_nth_pset(MPI_Session session, MPI_Info info, int n, int* pset_len, char* pset_name);
int MPI_Session_get_pset_info(MPI_Session session, const char* pset_name, MPI_Info* info);
int MPI_Session_get_errhandler(MPI_Session session, MPI_Errhandler* errhandler);
int MPI_Session_set_errhandler(MPI_Session session, MPI_Errhandler errhandler);
int MPI_Group_from_session_pset(MPI_Session session, const char* pset_name, MPI_Group* newgroup);
int MPI_Comm_create_from_group(MPI_Group group, const char* stringtag, MPI_Info info, MPI_Errhandler errhandler,
                               MPI_Comm* newcomm);

/* The same under their profiling names, for tools that interpose. */
int PMPI_Init(int* argc, char*** argv);
int PMPI_Init_thread(int* argc, char*** argv, int required, int* provided);
int PMPI_Finalize(void);
int PMPI_Initialized(int* flag);
int PMPI_Finalized(int* flag);
int PMPI_Query_thread(int* provided);
int PMPI_Abort(MPI_Comm comm, int errorcode);
int PMPI_Get_processor_name(char* name, int* resultlen);
int PMPI_Get_version(int* version, int* subversion);
int PMPI_Get_library_version(char* version, int* resultlen);
double PMPI_Wtime(void);
double PMPI_Wtick(void);
int PMPI_Comm_rank(MPI_Comm comm, int* rank);
int PMPI_Comm_size(MPI_Comm comm, int* size);
int PMPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm);
int PMPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm);
int PMPI_Comm_free(MPI_Comm* comm);
int PMPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void* attribute_val, int* flag);
int PMPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler);
int PMPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler* errhandler);
int PMPI_Error_class(int errorcode, int* errorclass);
int PMPI_Error_string(int errorcode, char* string, int* resultlen);
int PMPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int PMPI_Ssend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int PMPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status* status);
int PMPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status* status);
int PMPI_Sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source,
                          int recvtag, MPI_Comm comm, MPI_Status* status);
int PMPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request);
int PMPI_Issend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                MPI_Request* request);
int PMPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
               MPI_Request* request);
int PMPI_Wait(MPI_Request* request, MPI_Status* status);
int PMPI_Test(MPI_Request* request, int* flag, MPI_Status* status);
int PMPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status* array_of_statuses);
int PMPI_Waitany(int count, MPI_Request array_of_requests[], int* index, MPI_Status* status);
int PMPI_Testall(int count, MPI_Request array_of_requests[], int* flag, MPI_Status* array_of_statuses);
int PMPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status);
int PMPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status);
int PMPI_Send_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request);
int PMPI_Recv_init(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                   MPI_Request* request);
int PMPI_Start(MPI_Request* request);
int PMPI_Startall(int count, MPI_Request array_of_requests[]);
int PMPI_Request_free(MPI_Request* request);
int PMPI_Cancel(MPI_Request* request);
int PMPI_Test_cancelled(const MPI_Status* status, int* flag);
int PMPI_Get_count(const MPI_Status* status, MPI_Datatype datatype, int* count);
int PMPI_Type_size(MPI_Datatype datatype, int* size);
int PMPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype* newtype);
int PMPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype, MPI_Datatype* newtype);
int PMPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                             MPI_Datatype* newtype);
int PMPI_Type_indexed(int count, const int array_of_blocklengths[], const int array_of_displacements[],
                      MPI_Datatype oldtype, MPI_Datatype* newtype);
int PMPI_Type_create_hindexed(int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[],
                              MPI_Datatype oldtype, MPI_Datatype* newtype);
int PMPI_Type_create_indexed_block(int count, int blocklength, const int array_of_displacements[],
                                   MPI_Datatype oldtype, MPI_Datatype* newtype);
int PMPI_Type_create_struct(int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[],
                            const MPI_Datatype array_of_types[], MPI_Datatype* newtype);
int PMPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent, MPI_Datatype* newtype);
int PMPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype* newtype);
int PMPI_Type_commit(MPI_Datatype* datatype);
int PMPI_Type_free(MPI_Datatype* datatype);
int PMPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint* lb, MPI_Aint* extent);
int PMPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint* true_lb, MPI_Aint* true_extent);
int PMPI_Barrier(MPI_Comm comm);
int PMPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int PMPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm);
int PMPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int PMPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int PMPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int PMPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm);
int PMPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm);
int PMPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm);
int PMPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm);
int PMPI_Ibarrier(MPI_Comm comm, MPI_Request* request);
int PMPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request* request);
int PMPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                 MPI_Comm comm, MPI_Request* request);
int PMPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                    MPI_Request* request);
int PMPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int PMPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int PMPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                 const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm);
int PMPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                  void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int PMPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, MPI_Comm comm);
int PMPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                   MPI_Comm comm);

int PMPI_Comm_group(MPI_Comm comm, MPI_Group* group);
int PMPI_Comm_remote_group(MPI_Comm comm, MPI_Group* group);
int PMPI_Group_size(MPI_Group group, int* size);
int PMPI_Group_rank(MPI_Group group, int* rank);
int PMPI_Group_free(MPI_Group* group);
int PMPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup);
int PMPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup);
int PMPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup);
int PMPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup);
int PMPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup);
int PMPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup);
int PMPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup);
int PMPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2, int ranks2[]);
int PMPI_Group_compare(MPI_Group group1, MPI_Group group2, int* result);
int PMPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm);
int PMPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm);
int PMPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int* result);
int PMPI_Comm_test_inter(MPI_Comm comm, int* flag);
int PMPI_Comm_remote_size(MPI_Comm comm, int* size);
int PMPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader, int tag,
                          MPI_Comm* newintercomm);
int PMPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm* newintracomm);
int PMPI_Comm_set_name(MPI_Comm comm, const char* comm_name);
int PMPI_Comm_get_name(MPI_Comm comm, char* comm_name, int* resultlen);
int PMPI_Info_create(MPI_Info* info);
int PMPI_Info_free(MPI_Info* info);
int PMPI_Info_set(MPI_Info info, const char* key, const char* value);
int PMPI_Info_get(MPI_Info info, const char* key, int valuelen, char* value, int* flag);
int PMPI_Info_get_string(MPI_Info info, const char* key, int* buflen, char* value, int* flag);
int PMPI_Info_get_valuelen(MPI_Info info, const char* key, int* valuelen, int* flag);
int PMPI_Info_get_nkeys(MPI_Info info, int* nkeys);
int PMPI_Info_get_nthkey(MPI_Info info, int n, char* key);
int PMPI_Info_delete(MPI_Info info, const char* key);
int PMPI_Info_dup(MPI_Info info, MPI_Info* newinfo);
int PMPI_Get_address(const void* location, MPI_Aint* address);
int PMPI_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype, MPI_Datatype* newtype);
int PMPI_Type_hindexed(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[],
                       MPI_Datatype oldtype, MPI_Datatype* newtype);
int PMPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint array_of_displacements[],
                                    MPI_Datatype oldtype, MPI_Datatype* newtype);
int PMPI_Type_create_subarray(int ndims, const int array_of_sizes[], const int array_of_subsizes[],
                              const int array_of_starts[], int order, MPI_Datatype oldtype, MPI_Datatype* newtype);
int PMPI_Type_get_envelope(MPI_Datatype datatype, int* num_integers, int* num_addresses, int* num_datatypes,
                           int* combiner);
int PMPI_Type_set_name(MPI_Datatype datatype, const char* type_name);
int PMPI_Type_get_name(MPI_Datatype datatype, char* type_name, int* resultlen);
int PMPI_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr);
int PMPI_Free_mem(void* base);

int PMPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                        MPI_Comm comm);
int PMPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm);
int PMPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
               MPI_Request* request);
int PMPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                 MPI_Request* request);
int PMPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype,
                         MPI_Op op, MPI_Comm comm, MPI_Request* request);
int PMPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                               MPI_Comm comm, MPI_Request* request);
int PMPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request);
int PMPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request);
int PMPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                  const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request);
int PMPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                   void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request);
int PMPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                     const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                     MPI_Request* request);
int PMPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                    void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                    MPI_Request* request);
int PMPI_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request* request);
int PMPI_Bcast_init(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info,
                    MPI_Request* request);
int PMPI_Reduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                     MPI_Comm comm, MPI_Info info, MPI_Request* request);
int PMPI_Allreduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                        MPI_Comm comm, MPI_Info info, MPI_Request* request);
int PMPI_Scan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Info info, MPI_Request* request);
int PMPI_Exscan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                     MPI_Info info, MPI_Request* request);
int PMPI_Reduce_scatter_block_init(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype,
                                   MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int PMPI_Reduce_scatter_init(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int PMPI_Gather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                     MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int PMPI_Scatter_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                      MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int PMPI_Allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                        MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int PMPI_Alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                       MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int PMPI_Gatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                      const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                      MPI_Request* request);
int PMPI_Scatterv_init(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                       void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                       MPI_Request* request);
int PMPI_Allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                         const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                         MPI_Info info, MPI_Request* request);
int PMPI_Alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                        void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                        MPI_Comm comm, MPI_Info info, MPI_Request* request);
int PMPI_Op_create(MPI_User_function* user_fn, int commute, MPI_Op* op);
int PMPI_Op_free(MPI_Op* op);
int PMPI_Op_commutative(MPI_Op op, int* commute);
int PMPI_Reduce_local(const void* inbuf, void* inoutbuf, int count, MPI_Datatype datatype, MPI_Op op);
int PMPI_Buffer_attach(void* buffer, int size);
int PMPI_Buffer_detach(void* buffer_addr, int* size);
int PMPI_Bsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int PMPI_Ibsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                MPI_Request* request);
int PMPI_Rsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int PMPI_Irsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                MPI_Request* request);
int PMPI_Rsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                    MPI_Request* request);
int PMPI_Testany(int count, MPI_Request array_of_requests[], int* indx, int* flag, MPI_Status* status);
int PMPI_Testsome(int incount, MPI_Request array_of_requests[], int* outcount, int array_of_indices[],
                  MPI_Status* array_of_statuses);
int PMPI_Waitsome(int incount, MPI_Request array_of_requests[], int* outcount, int array_of_indices[],
                  MPI_Status* array_of_statuses);
int PMPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status);
int PMPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int* size);
int PMPI_Pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf, int outsize, int* position,
              MPI_Comm comm);
int PMPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount, MPI_Datatype datatype,
                MPI_Comm comm);
int PMPI_Get_elements(const MPI_Status* status, MPI_Datatype datatype, int* count);
int PMPI_Status_set_elements(MPI_Status* status, MPI_Datatype datatype, int count);
int PMPI_Status_set_cancelled(MPI_Status* status, int flag);
int PMPI_Comm_create_keyval(MPI_Comm_copy_attr_function* comm_copy_attr_fn,
                            MPI_Comm_delete_attr_function* comm_delete_attr_fn, int* comm_keyval, void* extra_state);
int PMPI_Comm_free_keyval(int* comm_keyval);
int PMPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void* attribute_val);
int PMPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval);
int PMPI_Keyval_create(MPI_Copy_function* copy_fn, MPI_Delete_function* delete_fn, int* keyval, void* extra_state);
int PMPI_Keyval_free(int* keyval);
int PMPI_Attr_put(MPI_Comm comm, int keyval, void* attribute_val);
int PMPI_Attr_get(MPI_Comm comm, int keyval, void* attribute_val, int* flag);
int PMPI_Attr_delete(MPI_Comm comm, int keyval);
int PMPI_Type_create_keyval(MPI_Type_copy_attr_function* type_copy_attr_fn,
                            MPI_Type_delete_attr_function* type_delete_attr_fn, int* type_keyval, void* extra_state);
int PMPI_Type_free_keyval(int* type_keyval);
int PMPI_Type_set_attr(MPI_Datatype datatype, int type_keyval, void* attribute_val);
int PMPI_Type_get_attr(MPI_Datatype datatype, int type_keyval, void* attribute_val, int* flag);
int PMPI_Type_delete_attr(MPI_Datatype datatype, int type_keyval);
int PMPI_Comm_create_errhandler(MPI_Comm_errhandler_function* comm_errhandler_fn, MPI_Errhandler* errhandler);
int PMPI_Errhandler_free(MPI_Errhandler* errhandler);
int PMPI_Comm_call_errhandler(MPI_Comm comm, int errorcode);
int PMPI_Add_error_class(int* errorclass);
int PMPI_Add_error_code(int errorclass, int* errorcode);
int PMPI_Add_error_string(int errorcode, const char* string);
int PMPI_Is_thread_main(int* flag);
int PMPI_Info_create_env(int argc, char* argv[], MPI_Info* info);
int PMPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm);
int PMPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message, MPI_Status* status);
int PMPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status);
int PMPI_Mrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message, MPI_Status* status);
int PMPI_Imrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message, MPI_Request* request);
int PMPI_Comm_set_info(MPI_Comm comm, MPI_Info info);
int PMPI_Comm_get_info(MPI_Comm comm, MPI_Info* info_used);
int PMPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm);
int PMPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                   void* recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                   MPI_Comm comm);
int PMPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                    void* recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                    MPI_Comm comm, MPI_Request* request);
int PMPI_Alltoallw_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                        const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[], const int rdispls[],
                        const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info, MPI_Request* request);
int PMPI_Comm_idup(MPI_Comm comm, MPI_Comm* newcomm, MPI_Request* request);
int PMPI_Comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm, MPI_Request* request);
int PMPI_Dims_create(int nnodes, int ndims, int dims[]);
int PMPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[], int reorder,
                     MPI_Comm* comm_cart);
int PMPI_Cart_map(MPI_Comm comm, int ndims, const int dims[], const int periods[], int* newrank);
int PMPI_Topo_test(MPI_Comm comm, int* status);
int PMPI_Cartdim_get(MPI_Comm comm, int* ndims);
int PMPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]);
int PMPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]);
int PMPI_Cart_rank(MPI_Comm comm, const int coords[], int* rank);
int PMPI_Cart_shift(MPI_Comm comm, int direction, int disp, int* rank_source, int* rank_dest);
int PMPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm);
int PMPI_Neighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                           MPI_Datatype recvtype, MPI_Comm comm);
int PMPI_Ineighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                            MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int PMPI_Neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                            MPI_Datatype recvtype, MPI_Comm comm);
int PMPI_Ineighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                             int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int PMPI_Intercomm_create_from_groups(MPI_Group local_group, int local_leader, MPI_Group remote_group,
                                      int remote_leader, const char* stringtag, MPI_Info info,
                                      MPI_Errhandler errhandler, MPI_Comm* newintercomm);
int PMPI_Isendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Request* request);
int PMPI_Isendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source, int recvtag,
                           MPI_Comm comm, MPI_Request* request);
int PMPI_Bsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                    MPI_Request* request);
int PMPI_Ssend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                    MPI_Request* request);
int PMPI_Grequest_start(MPI_Grequest_query_function* query_fn, MPI_Grequest_free_function* free_fn,
                        MPI_Grequest_cancel_function* cancel_fn, void* extra_state, MPI_Request* request);
int PMPI_Grequest_complete(MPI_Request request);
int PMPI_Send_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm);
int PMPI_Recv_c(void* buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                MPI_Status* status);
int PMPI_Isend_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                 MPI_Request* request);
int PMPI_Irecv_c(void* buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                 MPI_Request* request);
int PMPI_Get_count_c(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count);
int PMPI_Get_elements_c(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count);
int PMPI_Get_elements_x(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count);
int PMPI_Status_set_elements_x(MPI_Status* status, MPI_Datatype datatype, MPI_Count count);
int PMPI_Errhandler_create(MPI_Comm_errhandler_function* comm_errhandler_fn, MPI_Errhandler* errhandler);
int PMPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler);
int PMPI_Errhandler_get(MPI_Comm comm, MPI_Errhandler* errhandler);
int PMPI_Type_get_contents(MPI_Datatype datatype, int max_integers, int max_addresses, int max_datatypes,
                           int array_of_integers[], MPI_Aint array_of_addresses[], MPI_Datatype array_of_datatypes[]);
int PMPI_Type_create_darray(int size, int rank, int ndims, const int array_of_gsizes[], const int array_of_distribs[],
                            const int array_of_dargs[], const int array_of_psizes[], int order, MPI_Datatype oldtype,
                            MPI_Datatype* newtype);
int PMPI_Type_match_size(int typeclass, int size, MPI_Datatype* datatype);
int PMPI_Pack_external(const char datarep[], const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf,
                       MPI_Aint outsize, MPI_Aint* position);
int PMPI_Pack_external_size(const char datarep[], int incount, MPI_Datatype datatype, MPI_Aint* size);
int PMPI_Unpack_external(const char datarep[], const void* inbuf, MPI_Aint insize, MPI_Aint* position, void* outbuf,
                         int outcount, MPI_Datatype datatype);
int PMPI_Type_contiguous_c(MPI_Count count, MPI_Datatype oldtype, MPI_Datatype* newtype);
int PMPI_Type_vector_c(MPI_Count count, MPI_Count blocklength, MPI_Count stride, MPI_Datatype oldtype,
                       MPI_Datatype* newtype);
int PMPI_Type_create_hindexed_c(MPI_Count count, const MPI_Count array_of_blocklengths[],
                                const MPI_Count array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype* newtype);
int PMPI_Type_create_indexed_block_c(MPI_Count count, MPI_Count blocklength, const MPI_Count array_of_displacements[],
                                     MPI_Datatype oldtype, MPI_Datatype* newtype);
int PMPI_Type_size_c(MPI_Datatype datatype, MPI_Count* size);
int PMPI_Type_size_x(MPI_Datatype datatype, MPI_Count* size);
int PMPI_Type_get_extent_c(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent);
int PMPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent);
int PMPI_Type_get_true_extent_c(MPI_Datatype datatype, MPI_Count* true_lb, MPI_Count* true_extent);
int PMPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count* true_lb, MPI_Count* true_extent);
int PMPI_Type_struct(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[],
                     MPI_Datatype array_of_types[], MPI_Datatype* newtype);
int PMPI_Address(void* location, MPI_Aint* address);
int PMPI_Type_extent(MPI_Datatype datatype, MPI_Aint* extent);
int PMPI_Type_lb(MPI_Datatype datatype, MPI_Aint* displacement);
int PMPI_Type_ub(MPI_Datatype datatype, MPI_Aint* displacement);
int PMPI_Session_init(MPI_Info info, MPI_Errhandler errhandler, MPI_Session* session);
int PMPI_Session_finalize(MPI_Session* session);
int PMPI_Session_get_info(MPI_Session session, MPI_Info* info_used);
int PMPI_Session_get_num_psets(MPI_Session session, MPI_Info info, int* npset_names);
int PMPI_Session_get_nth_pset(MPI_Session session, MPI_Info info, int n, int* pset_len, char* pset_name);
int PMPI_Session_get_pset_info(MPI_Session session, const char* pset_name, MPI_Info* info);
int PMPI_Session_get_errhandler(MPI_Session session, MPI_Errhandler* errhandler);
int PMPI_Session_set_errhandler(MPI_Session session, MPI_Errhandler errhandler);
int PMPI_Group_from_session_pset(MPI_Session session, const char* pset_name, MPI_Group* newgroup);
int PMPI_Comm_create_from_group(MPI_Group group, const char* stringtag, MPI_Info info, MPI_Errhandler errhandler,
                                MPI_Comm* newcomm);
int PMPIX_Delete_error_class(int errorclass);
int PMPIX_Delete_error_code(int errorcode);
int PMPIX_Delete_error_string(int errorcode);
#ifdef __cplusplus
}
#endif

#endif /* CARTAGE_MPI_H_ */
