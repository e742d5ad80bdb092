#!/bin/sh
echo "installing $0"
