/* vt_dir.h - a test's temporary directory removed with what it holds (one level:
   the stores and rendezvous files the elastic and lighthouse tests make). */
#ifndef VT_DIR_H
#define VT_DIR_H
#include <dirent.h>
#include <stdio.h>
#include <unistd.h>

static void vt_clear_dir(const char* dir)
{
    DIR* d = opendir(dir);
    char path[400];
    for (struct dirent* e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') snprintf(path, sizeof path, "%s/%s", dir, e->d_name), unlink(path);
    if (d) closedir(d);
    rmdir(dir);
}
#endif
