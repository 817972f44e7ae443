/* A module that runs a thread of its own, in its own code: rmmod must wait while the thread is
 * inside the module (its ip in the module's text, or a return address into it on its stack, as
 * when the loop sleeps in usleep), and unload once the thread has left. */
#include <linux/module.h>
#include <pthread.h>
#include <unistd.h>

static bool spin;        /* loop in the module's own code, not in usleep */
static bool stop = true; /* the exit tells the thread to leave (else it stays: rmmod must fail) */
module_param(spin, bool, 0644);
module_param(stop, bool, 0644);

static volatile int running = 1;
static volatile unsigned long counter;

static void *loop(void *arg)
{
	while (running) {
		if (spin)
			for (int i = 0; i < 100000 && running; i++)
				counter++;
		else
			usleep(1000);
	}
	usleep(100000); /* still inside for 100 ms after the exit: rmmod waits */
	return arg;
}

static int __init threaded_init(void)
{
	pthread_t t;
	int err = pthread_create(&t, NULL, loop, NULL);
	if (err)
		return -err;
	pthread_detach(t);
	return 0;
}

static void __exit threaded_exit(void)
{
	if (stop)
		running = 0;
}

module_init(threaded_init);
module_exit(threaded_exit);
MODULE_LICENSE("GPL");
