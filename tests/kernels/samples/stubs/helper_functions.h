/* Ours, not NVIDIA's: a stand-in for cuda-samples' Common/helper_functions.h (timers, command line), declarations
 * only, for the same reason as helper_cuda.h here. */
#ifndef CUA_SAMPLES_HELPER_FUNCTIONS_H
#define CUA_SAMPLES_HELPER_FUNCTIONS_H

typedef struct StopWatchInterface StopWatchInterface;

bool sdkCreateTimer(StopWatchInterface **timer);
bool sdkDeleteTimer(StopWatchInterface **timer);
bool sdkStartTimer(StopWatchInterface **timer);
bool sdkStopTimer(StopWatchInterface **timer);
bool sdkResetTimer(StopWatchInterface **timer);
float sdkGetTimerValue(StopWatchInterface **timer);
float sdkGetAverageTimerValue(StopWatchInterface **timer);
bool checkCmdLineFlag(const int argc, const char **argv, const char *flag);
int getCmdLineArgumentInt(const int argc, const char **argv, const char *flag);

#endif
