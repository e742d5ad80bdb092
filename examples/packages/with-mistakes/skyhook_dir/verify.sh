#!/bin/sh
echo "verifying $0"
