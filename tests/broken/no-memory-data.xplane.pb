
	/host:CPU"worker-0