{|
	/host:CPU